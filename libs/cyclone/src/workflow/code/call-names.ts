import { uuid7 } from '../../common/uuid7.js';

/** A call's name as messages quote it: `'ship-1'`, or the type of what was given instead. */
export function label(name: unknown): string {
  return typeof name === 'string' ? `'${name}'` : String(typeof name);
}

const CALLS: Record<string, string> = {
  run: 'an inline call (wf.run)',
  step: 'a step (wf.step)',
  sleep: 'a sleep (wf.sleep)',
  signal: 'a signal wait (wf.waitForSignal)',
  child: 'a child run (wf.startChild)',
  result: "a wait for a child's result (wf.result)",
  patch: 'a patch (wf.patched)',
};

/** What a node is, for NonDeterminismError: the call that made it, and its kind. */
export function describeNode(type: string, kind: unknown): string {
  const base = CALLS[type] ?? `a ${type} node`;
  return typeof kind === 'string' ? `${base} of "${kind}"` : base;
}

/**
 * A child's run id: time-ordered like every run id, and above its parent's
 * (a millisecond later at least, whatever the clocks say), so locking runs in
 * id order locks a parent before its child (see record-nodes.sql).
 */
export function childRunId(parentId: string): string {
  const parentMs = Number.parseInt(parentId.replace(/-/g, '').slice(0, 12), 16);
  return uuid7(Math.max(Date.now(), parentMs + 1));
}
