import { Injectable } from '@nestjs/common';
import { CycloneClient } from '../client/cyclone.client.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { BulkCountChangedError } from '../errors/bulk-count-changed.error.js';
import { CycloneError } from '../errors/cyclone.error.js';
import type { RunState } from '../sql/names.js';
import { BULK_TARGETS } from '../sql/dashboard.sql.js';
import type { BulkAction, DashboardBulkPreview, DashboardBulkResult } from './dashboard-api.interface.js';
import { BULK_LIMIT } from './dashboard.constants.js';
import type { BulkQuery, RunFilters } from './dashboard-params.js';
import { runListFilters } from './dashboard-reader.js';

/** The runs each action applies to: a retry reopens a failed run, a cancel stops one that has not finished. */
const ACTION_STATES: Record<BulkAction, RunState[]> = {
  retry: ['failed'],
  cancel: ['running', 'paused'],
};

/**
 * Retry or cancel every run the runs list's filters match, in two steps.
 * The preview counts the runs the action applies to and names the newest;
 * the operator confirms that count; the action then acts on the runs the
 * same filters match up to that newest one, so runs created since are left
 * alone. When more match than were confirmed (an older run failed
 * meanwhile), it does nothing and says how many match now
 * (BulkCountChangedError); fewer (some finished meanwhile) it acts on, and
 * says how many. Each run is retried or cancelled by the client's own call,
 * in a transaction of its own, so a run it cannot act on is reported and the
 * others go on.
 */
@Injectable()
export class DashboardBulk {
  constructor(
    private readonly database: CycloneDatabase,
    private readonly client: CycloneClient,
  ) {}

  async preview(action: BulkAction, filters: RunFilters): Promise<DashboardBulkPreview> {
    const targets = await this.targets(action, filters, null);
    return {
      action,
      count: Math.min(targets.length, BULK_LIMIT),
      upTo: targets[0] ?? null,
      tooMany: targets.length > BULK_LIMIT,
      limit: BULK_LIMIT,
    };
  }

  async act(action: BulkAction, query: BulkQuery): Promise<DashboardBulkResult> {
    const targets = query.upTo === null ? [] : await this.targets(action, query, query.upTo);
    if (targets.length > query.confirmed) throw new BulkCountChangedError(query.confirmed, targets.length);
    const result: DashboardBulkResult = { action, matched: targets.length, changed: 0, failed: [] };
    for (const runId of targets) {
      try {
        const changed = action === 'retry' ? (await this.client.retryAll(runId)) > 0 : await this.client.cancel(runId);
        if (changed) result.changed += 1;
      } catch (err) {
        if (!(err instanceof CycloneError)) throw err;
        result.failed.push({ runId, message: err.message });
      }
    }
    return result;
  }

  /** The runs the action applies to among those the filters match, newest first: one more than the limit at most. */
  private async targets(action: BulkAction, filters: RunFilters, upTo: string | null): Promise<string[]> {
    const { rows } = await this.database.query(BULK_TARGETS, [...runListFilters(filters), ACTION_STATES[action], upTo, BULK_LIMIT + 1]);
    return rows.map((r) => r.id);
  }
}
