import { sqlMigration } from './sql-migration.js';

/**
 * The sweep's and the timer loop's partial indexes, keyed on a column that no
 * lookup by id or run names. A lookup whose predicate implies a partial
 * index's looks to the planner like a scan of that index; with statistics a
 * little stale (just after a vacuum, or before the next analyse) the index
 * seems nearly empty, and the scan walks every entry instead of one key.
 *
 * - Leases: heartbeats and completions find their row by id and say
 *   state = 'running', exactly the old lease index's predicate. With a large
 *   history, completions of 200 steps took 60-150 ms instead of 2 ms and
 *   heartbeats 12 ms. Keyed on lease_expiry IS NOT NULL instead: every
 *   transition out of running clears it, so the two say the same thing.
 * - Timers: routing looks for signal waits whose signal came early by run id
 *   and state = 'waiting_signal', which implied the old timer index's
 *   predicate: with a few thousand runs newly waiting on an approval since
 *   the last analyse, each routing call scanned every waiting node (5.7 ms at
 *   28,000 waiting nodes, growing with them, against 0.07 ms by run id). Also
 *   keyed on wake_at IS NOT NULL now; waits without a timeout, which have no
 *   wake time, leave it.
 */
const UP = /* sql */ `
DROP INDEX cyclone_steps_lease;
CREATE INDEX cyclone_steps_lease ON cyclone_steps (lease_expiry) WHERE lease_expiry IS NOT NULL;

DROP INDEX cyclone_steps_wake;
CREATE INDEX cyclone_steps_wake ON cyclone_steps (wake_at)
  WHERE wake_at IS NOT NULL AND state IN ('waiting_timer', 'waiting_signal');
`;

const DOWN = /* sql */ `
DROP INDEX cyclone_steps_lease;
CREATE INDEX cyclone_steps_lease ON cyclone_steps (lease_expiry) WHERE state = 'running';

DROP INDEX cyclone_steps_wake;
CREATE INDEX cyclone_steps_wake ON cyclone_steps (wake_at) WHERE state IN ('waiting_timer', 'waiting_signal');
`;

export class CycloneIndexPredicates1764748800000 extends sqlMigration('CycloneIndexPredicates1764748800000', 5, UP, DOWN) {}
