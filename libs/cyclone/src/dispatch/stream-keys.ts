/**
 * Cyclone's names in Redis. One Redis (or logical database) serves one
 * Cyclone database: the keys are not namespaced further.
 */

/** The shard count, published at startup so that workers know which streams to read (seed 004, step 1). */
export const SHARDS_KEY = 'cyclone:shards';
/** A value Cyclone writes, and records in cyclone_dispatch: its absence means Redis lost its data. */
export const EPOCH_KEY = 'cyclone:epoch';
/** The one consumer group of every stream; each client is a consumer in it. */
export const GROUP = 'cyclone';

/** A queue's stream for one shard. */
export function streamKey(queue: string, shard: number): string {
  return `cyclone:stream:${queue}:${shard}`;
}

/** Every stream of a queue. */
export function queueStreams(queue: string, shards: number): string[] {
  return Array.from({ length: shards }, (_, shard) => streamKey(queue, shard));
}

/** The fields of a message: the step to start, and enough to route it without a read. */
export interface DispatchMessage {
  step: string;
  run: string;
  kind: string;
  type: string;
}

/** A message's fields, or undefined when it is not one of Cyclone's (malformed, or written by someone else). */
export function parseMessage(fields: Record<string, string>): DispatchMessage | undefined {
  const { step, run, kind, type } = fields;
  if (!/^\d{1,19}$/.test(step ?? '') || !/^[0-9a-f-]{36}$/i.test(run ?? '') || typeof kind !== 'string' || typeof type !== 'string') {
    return undefined;
  }
  return { step, run, kind, type };
}
