import type { ResolvedOptions } from '../options/resolved-options.js';
import type { NotificationListener } from '../notifications/notification-listener.js';

/**
 * With broker dispatch on, a loop woken by NOTIFY still looks this often:
 * some rows become due without one (a publisher that died before its commit
 * leaves its batch to be published again).
 */
const QUIET_SAFETY_MS = 5_000;

/**
 * How long a message must have been idle before another client takes it
 * over. A message whose step runs has its idle time reset every leaseTtl/3,
 * and its lease is renewed as often on a timer of its own: twice the lease
 * TTL is well above both, so a healthy step's message is never taken, while
 * a stopped consumer's is taken soon after its step's lease has expired.
 */
export function reclaimIdleMs(options: ResolvedOptions): number {
  return Math.max(2 * options.leaseTtlMs, 2_000);
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
 * run at every poll tick: every half lease, at most every 10 s.
 */
export function recoveryIntervalMs(options: ResolvedOptions): [number, number] {
  const [min, max] = options.pollIntervalMs;
  if (!options.dispatch) return [min, max];
  const every = Math.max(max, Math.min(options.leaseTtlMs / 2, 10_000));
  return [every * 0.75, every * 1.25];
}

/**
 * The wait of a loop that NOTIFY wakes (the outbox publisher, the timer
 * sweeper with dispatch on): until its next row or timer is due, at most
 * QUIET_SAFETY_MS; and the poll interval while the LISTEN connection is down,
 * when wake-ups are lost.
 */
export function quietDelay(listener: NotificationListener, poll: () => number, nextDueMs: number | null): number {
  if (!listener.isConnected) return poll();
  return Math.max(1, Math.min(nextDueMs ?? QUIET_SAFETY_MS, QUIET_SAFETY_MS));
}
