import { Inject, Injectable, Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { CYCLONE_SCHEDULER, FLOW_KEY_INTERVAL_MS } from '../cyclone.constants.js';
import { Loop } from '../common/loop.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { InvalidKeyError } from '../errors/invalid-key.error.js';
import { SET_FLOW_KEYS, UNKEYED_FLOW_STEPS, UNMARK_FLOW_STEPS } from '../sql/flow-keys.sql.js';
import { flowKeys } from '../steps/flow-limits.js';
import { StepRegistry } from '../steps/step-registry.js';
import type { MaintenanceService } from './maintenance-service.js';

/** At most this many steps a statement. */
const BATCH = 500;

/**
 * Keeps the flow keys of available steps in line with this app's limits. A
 * step's key is computed at enqueue, so a limit added to a kind with a
 * backlog, or removed from one, would leave those steps where no claim looks
 * for them: this pass gives the backlog of a newly limited kind its keys
 * (from each run's input) and hands a kind whose limits were removed back to
 * the plain claim. Runs every FLOW_KEY_INTERVAL_MS (and at startup), since
 * during a rolling deploy older replicas may still enqueue by their rules.
 */
@Injectable()
export class FlowKeySweeper implements MaintenanceService {
  private readonly logger = new Logger('Cyclone');
  readonly loop: Loop;

  constructor(
    private readonly database: CycloneDatabase,
    private readonly registry: StepRegistry,
    @Inject(CYCLONE_SCHEDULER) scheduler: SchedulerRegistry,
  ) {
    this.loop = new Loop(
      'cyclone:flow-keys',
      () => FLOW_KEY_INTERVAL_MS * (0.75 + Math.random() / 2),
      async () => void (await this.sweep()),
      scheduler,
      (err) => this.database.covers(err),
    );
  }

  /**
   * At startup only in an app with limits, whose newly limited backlog
   * should not wait: an app without any has only steps to hand back, which
   * can wait for the first interval.
   */
  get runsAtStartup(): boolean {
    return this.registry.all().some((s) => s.flow);
  }

  /** One pass; returns how many steps it gave keys to and took keys from. */
  async sweep(): Promise<{ keyed: number; unkeyed: number }> {
    const steps = this.registry.all();
    const unlimited = steps.filter((s) => !s.flow).map((s) => s.kind);
    const limited = steps.filter((s) => s.flow);
    let unkeyed = 0;
    if (unlimited.length > 0) {
      for (;;) {
        const n = (await this.database.query(UNMARK_FLOW_STEPS, [unlimited, BATCH])).rowCount ?? 0;
        unkeyed += n;
        if (n < BATCH) break;
      }
    }
    let keyed = 0;
    if (limited.length > 0) {
      for (;;) {
        const { rows } = await this.database.query(UNKEYED_FLOW_STEPS, [limited.map((s) => s.kind), BATCH]);
        if (rows.length === 0) break;
        const keys = rows.map((row) => this.keysOf(row.kind, row.input));
        const { rowCount } = await this.database.query(SET_FLOW_KEYS, [
          rows.map((r) => r.run_id),
          rows.map((r) => r.id),
          keys.map((k) => k[0]),
          keys.map((k) => k[1]),
        ]);
        keyed += rowCount ?? 0;
        if (rows.length < BATCH) break;
      }
    }
    if (keyed + unkeyed > 0) {
      this.logger.log(`Flow control: gave ${keyed} queued step(s) the keys of their kind's limits; took them from ${unkeyed}`);
    }
    return { keyed, unkeyed };
  }

  /** A backlog step whose input its key function refuses is counted under the empty key, and said so. */
  private keysOf(kind: string, input: unknown): [string, string | null] {
    const step = this.registry.get(kind);
    try {
      const [flowKey, rateKey] = flowKeys(kind, step.flow, input);
      return [flowKey ?? '', rateKey];
    } catch (err) {
      if (!(err instanceof InvalidKeyError)) throw err;
      this.logger.warn(`${err.message.replace(/; the enqueue wrote nothing\.$/, '')}; this queued step is counted under the key ''.`);
      return ['', step.flow?.rateKey ? '' : null];
    }
  }
}
