/** What `ctx.snooze(d)` returns: a handler result that means "run me again after `delayMs`". */
export class Snooze {
  constructor(readonly delayMs: number) {}
}
