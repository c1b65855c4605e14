import { sqlMigration } from './sql-migration.js';

/**
 * The sweep's index of running steps, keyed on a lease being held rather than
 * on state = 'running'. Every transition out of running clears lease_expiry,
 * so the two say the same thing; but heartbeats and completions, which find
 * their row by id, also say state = 'running', and a partial index on exactly
 * that predicate looked to the planner like the cheapest way to find one row
 * (after a vacuum it counts almost no entries). It then scanned every entry of
 * the index, dead ones included, instead of one primary-key lookup: with a
 * large history, completions of 200 steps took 60-150 ms instead of 2 ms and
 * heartbeats 12 ms. Nothing that looks a row up by id names lease_expiry.
 */
const UP = /* sql */ `
DROP INDEX cyclone_steps_lease;
CREATE INDEX cyclone_steps_lease ON cyclone_steps (lease_expiry) WHERE lease_expiry IS NOT NULL;
`;

const DOWN = /* sql */ `
DROP INDEX cyclone_steps_lease;
CREATE INDEX cyclone_steps_lease ON cyclone_steps (lease_expiry) WHERE state = 'running';
`;

export class CycloneLeaseIndex1764748800000 extends sqlMigration('CycloneLeaseIndex1764748800000', 5, UP, DOWN) {}
