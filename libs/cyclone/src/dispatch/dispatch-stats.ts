/** Why a step was dispatched again, in the words of `cyclone_dispatch_redispatched_total{reason}`. */
export type RedispatchReason = 'lease_expired' | 'lost' | 'epoch';

/**
 * What broker dispatch has done in this client, for health and metrics:
 * counters only ever grow; `redisUp` and the pending-message reader are
 * filled in by the dispatch service.
 */
export class DispatchStats {
  readonly published = new Map<string, number>();
  readonly redispatched = new Map<RedispatchReason, number>();
  readonly reclaimed = new Map<string, number>();
  readonly maxDeliveries = new Map<string, number>();
  /** Messages that were not Cyclone's, acknowledged and dropped. */
  malformed = 0;
  redisUp: () => boolean = () => false;
  /** Pending messages of the served queues and the oldest one's idle time, read from Redis. */
  pending: () => Promise<{ count: number; oldestIdleMs: number | null }> = async () => ({ count: 0, oldestIdleMs: null });

  count<K>(map: Map<K, number>, key: K, n = 1): void {
    if (n > 0) map.set(key, (map.get(key) ?? 0) + n);
  }
}
