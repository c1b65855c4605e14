import { randomFillSync } from 'node:crypto';

/** Random bytes drawn in blocks: one system call per 256 ids rather than per id. */
const POOL_IDS = 256;
const pool = Buffer.alloc(16 * POOL_IDS);
let next = POOL_IDS;

/**
 * A time-ordered UUID (version 7, RFC 9562): 48 bits of Unix milliseconds,
 * then 74 random bits. Run ids are the key of the runs table and lead the
 * steps' (run_id, node_id) index; random (v4) ids land on random pages of
 * those indexes, which with a large history means cache misses and full-page
 * writes on every enqueue and completion. Time-ordered ids are inserted at the
 * right edge, on a few hot pages, however large the history grows.
 */
export function uuid7(now = Date.now()): string {
  if (next === POOL_IDS) {
    randomFillSync(pool);
    next = 0;
  }
  const bytes = pool.subarray(16 * next, 16 * ++next);
  bytes.writeUIntBE(now, 0, 6);
  bytes[6] = (bytes[6] & 0x0f) | 0x70;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The lowest UUIDv7 of a millisecond: every id made at `ms` or later sorts at
 * or above it, every id made earlier below it. Turns a time range into a
 * range of run ids, which the runs table's primary key can scan.
 */
export function uuid7Floor(ms: number): string {
  const hex = Math.max(0, Math.trunc(ms)).toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-7000-8000-000000000000`;
}
