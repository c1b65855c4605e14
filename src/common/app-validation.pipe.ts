import { BadRequestException, Injectable, ValidationPipe, type ArgumentMetadata } from '@nestjs/common';

/** Deepest request body accepted. The app's bodies are flat; a few levels leave room, thousands would overflow the stack. */
export const MAX_BODY_DEPTH = 32;

/**
 * Every request body is checked against its class: a bad one is a 400
 * saying what is wrong, before it reaches a query or a job (a missing body,
 * a wrong type, an 8 KB email address). First its nesting is measured
 * without recursion: validation walks the value recursively, and a body of
 * a few KB nested ~1,500 levels deep would exhaust the stack (a 500,
 * "Maximum call stack size exceeded") rather than be refused.
 */
@Injectable()
export class AppValidationPipe extends ValidationPipe {
  constructor() {
    super({ whitelist: true, forbidNonWhitelisted: true });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type === 'body' && depthOf(value, MAX_BODY_DEPTH) > MAX_BODY_DEPTH) {
      throw new BadRequestException(`The request body is nested more than ${MAX_BODY_DEPTH} levels deep; send a flatter one.`);
    }
    return super.transform(value, metadata);
  }
}

/** How deep objects and arrays nest in `value`, counted up to one past `limit`. */
function depthOf(value: unknown, limit: number): number {
  let deepest = 0;
  const pending: [unknown, number][] = [[value, 1]];
  while (pending.length > 0) {
    const [node, depth] = pending.pop()!;
    if (node === null || typeof node !== 'object') continue;
    deepest = Math.max(deepest, depth);
    if (deepest > limit) return deepest;
    for (const child of Object.values(node)) pending.push([child, depth + 1]);
  }
  return deepest;
}
