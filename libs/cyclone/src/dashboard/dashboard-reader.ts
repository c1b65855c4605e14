import { Injectable } from '@nestjs/common';
import { CycloneClient } from '../client/cyclone.client.js';
import { uuid7Floor } from '../common/uuid7.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import type { RunInfo, StepInfo } from '../interfaces/run-info.interface.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import {
  LIST_RUNS_NEWER,
  LIST_RUNS_OLDER,
  QUEUE_COUNTS,
  type RunListParams,
  type RunListRow,
} from '../sql/dashboard.sql.js';
import type {
  DashboardQueues,
  DashboardRun,
  DashboardRunSummary,
  DashboardRuns,
  DashboardSchedules,
} from './dashboard-api.interface.js';
import { THROUGHPUT_SAMPLE, THROUGHPUT_WINDOW_SECONDS } from './dashboard.constants.js';
import { isRunId, type RunsQuery } from './dashboard-params.js';

/** What the pages show, read from the database with the dashboard's statements and the client's reads. */
@Injectable()
export class DashboardReader {
  constructor(
    private readonly database: CycloneDatabase,
    private readonly client: CycloneClient,
    private readonly stats: CycloneStats,
  ) {}

  async queues(): Promise<DashboardQueues> {
    const served = this.stats.servedQueues;
    const { rows } = await this.database.query(QUEUE_COUNTS, [
      [...served.keys()],
      THROUGHPUT_WINDOW_SECONDS,
      THROUGHPUT_SAMPLE,
    ]);
    const perMinute = (count: number, seconds: number) => round((count * 60) / seconds);
    return {
      queues: rows.map((row) => ({
        name: row.queue,
        available: row.available,
        scheduled: row.scheduled,
        running: row.running,
        failed: row.failed,
        paused: row.paused,
        oldestAvailableMs: row.oldest_available_ms === null ? null : Number(row.oldest_available_ms),
        isPaused: row.queue_paused,
        servedHere: served.has(row.queue),
        throughput: {
          completedPerMinute: perMinute(row.completed_recently, row.sample_seconds),
          failedPerMinute: perMinute(row.discarded_recently, row.sample_seconds),
        },
      })),
      throughputWindowSeconds: THROUGHPUT_WINDOW_SECONDS,
      at: new Date(),
    };
  }

  /**
   * A page of runs, newest first. One more row than the page is read to know
   * whether another page follows; the cursors are the ids at the page's ends.
   */
  async runs(query: RunsQuery): Promise<DashboardRuns> {
    const search = query.search;
    const params: RunListParams = [
      query.state,
      query.kind,
      query.queue,
      query.from ? uuid7Floor(query.from.getTime()) : null,
      query.to ? uuid7Floor(query.to.getTime() + 1) : null,
      search,
      search !== null && isRunId(search) ? search.toLowerCase() : null,
      query.after ?? query.before,
      query.limit + 1,
    ];
    if (query.after !== null) {
      const { rows } = await this.database.query(LIST_RUNS_NEWER, params);
      // Nothing newer than the cursor any more: the newest page is the answer.
      if (rows.length === 0) return this.runs({ ...query, after: null });
      const more = rows.length > query.limit;
      const page = rows.slice(0, query.limit).reverse();
      return { runs: page.map(toSummary), older: page.at(-1)!.id, newer: more ? page[0].id : null };
    }
    const { rows } = await this.database.query(LIST_RUNS_OLDER, params);
    const more = rows.length > query.limit;
    const page = rows.slice(0, query.limit);
    return {
      runs: page.map(toSummary),
      older: more ? page.at(-1)!.id : null,
      newer: query.before !== null ? (page[0]?.id ?? query.before) : null,
    };
  }

  /** A run and its nodes; RunNotFoundError (404) when there is no such run. */
  async run(runId: string): Promise<DashboardRun> {
    const [run, steps] = await Promise.all([this.client.getRun(runId), this.client.listSteps(runId)]);
    return { run: toRunView(run, steps), steps };
  }

  /** The app's schedules with their next and last ticks (client.listSchedules). */
  async schedules(): Promise<DashboardSchedules> {
    return { schedules: await this.client.listSchedules() };
  }
}

function toSummary(row: RunListRow): DashboardRunSummary {
  return {
    id: row.id,
    name: row.kind ?? row.workflow ?? '',
    type: row.workflow !== null ? 'workflow' : 'job',
    state: row.state,
    queue: row.queue,
    uniqueKey: row.unique_key,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    finishedAt: row.finished_at,
    dueAt: row.due_at,
  };
}

/** As the runs list's due_at: a running run whose unfinished steps are all available later is due at the first of them. */
function dueAt(run: RunInfo, steps: StepInfo[]): Date | null {
  if (run.state !== 'running') return null;
  const now = Date.now();
  const open = steps.filter((s) => s.state === 'available' || s.state === 'running');
  if (open.length === 0 || !open.every((s) => s.state === 'available' && s.scheduledAt.getTime() > now)) return null;
  return new Date(Math.min(...open.map((s) => s.scheduledAt.getTime())));
}

function toRunView(run: RunInfo, steps: StepInfo[]): DashboardRun['run'] {
  return {
    ...run,
    name: run.kind ?? run.workflow ?? '',
    type: run.workflow !== null ? 'workflow' : 'job',
    dueAt: dueAt(run, steps),
  };
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
