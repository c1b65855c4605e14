import type { ResolvedOptions } from '../options/resolved-options.js';

/**
 * The intervals of broker dispatch's loops, from the lease TTL: a message
 * whose step runs has its idle time reset every leaseTtl/3, so one idle for
 * a whole lease TTL has lost its consumer.
 */
export function reclaimIdleMs(options: ResolvedOptions): number {
  return Math.max(options.leaseTtlMs, 1_000);
}

/** How often the dispatch loop looks for stopped consumers' messages and for a Redis that lost its data. */
export function dispatchTickMs(options: ResolvedOptions): number {
  return Math.min(Math.max(options.leaseTtlMs / 2, 250), 2_000);
}

/**
 * How long past its expiry the recovery sweep leaves a lease, with dispatch
 * on: the reclaimer takes a dead consumer's step over with its message first,
 * so that the message's deliveries count towards maxDeliveries; the sweep is
 * the net for what the streams cannot recover (a message acknowledged, then
 * its worker lost). Without dispatch, none.
 */
export function leaseGraceMs(options: ResolvedOptions): number {
  return options.dispatch ? reclaimIdleMs(options) + 2 * dispatchTickMs(options) : 0;
}

/**
 * The recovery sweep's interval. With dispatch on, idle workers send the
 * database nothing, and the sweep, the net behind the reclaimer, need not
 * run at every poll tick: at most every 5 s (sooner with a shorter lease).
 */
export function recoveryIntervalMs(options: ResolvedOptions): [number, number] {
  const [min, max] = options.pollIntervalMs;
  if (!options.dispatch) return [min, max];
  const every = Math.max(max, Math.min(options.leaseTtlMs / 2, 5_000));
  return [every * 0.75, every * 1.25];
}
