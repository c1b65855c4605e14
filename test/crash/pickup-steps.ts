import { Injectable } from '@nestjs/common';
import { CycloneDatabase, Step, type StepContext } from 'cyclone-nestjs';
import { sleep } from '../support/wait.js';

/**
 * The step of the pickup tests (test/pickup.e2e-spec.ts): a quick one returns
 * at once and leaves nothing behind, so a worker that runs a backlog of them
 * claims ahead of its slots; a timed one records when its handler was
 * entered, by which process, under which lease, and then takes `ms`.
 */
export const PICKUP_KIND = 'pickup';

export interface PickupInput {
  /** Set on the steps whose start the test reads; the quick ones leave it out. */
  ms?: number;
}

export const CREATE_PICKUP_TABLES = /* sql */ `
CREATE TABLE IF NOT EXISTS pickup_starts (
  run_id        uuid NOT NULL,
  fencing_token bigint NOT NULL,
  pid           int NOT NULL,
  started_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);`;

@Injectable()
export class PickupSteps {
  constructor(private readonly database: CycloneDatabase) {}

  @Step(PICKUP_KIND)
  async pickup(input: PickupInput, ctx: StepContext): Promise<null> {
    if (input.ms === undefined) return null;
    await this.database.pool.query('INSERT INTO pickup_starts (run_id, fencing_token, pid) VALUES ($1, $2, $3)', [
      ctx.runId,
      ctx.fencingToken,
      process.pid,
    ]);
    await sleep(input.ms);
    return null;
  }
}
