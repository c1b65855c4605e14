import { Injectable } from '@nestjs/common';
import { CycloneClient } from '../client/cyclone.client.js';
import { uuid7Floor } from '../common/uuid7.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import type { RunInfo, StepInfo } from '../interfaces/run-info.interface.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import {
  LIST_CLIENTS,
  LIST_RUNS_NEWER,
  LIST_RUNS_OLDER,
  PICKER_NAMES,
  QUEUE_COUNTS,
  QUEUE_THROUGHPUT,
  type RunListFilters,
  type RunListParams,
  type RunListRow,
  type ThroughputRow,
} from '../sql/dashboard.sql.js';
import { CLIENT_REFRESH_INTERVAL_MS, CLIENT_STALE_AFTER_MS } from '../cyclone.constants.js';
import type {
  DashboardClients,
  DashboardNames,
  DashboardQueues,
  DashboardRun,
  DashboardRunSummary,
  DashboardRuns,
  DashboardSchedules,
  DashboardThroughput,
} from './dashboard-api.interface.js';
import { PICKER_LIMIT, THROUGHPUT_MINUTE_SAMPLE, THROUGHPUT_SAMPLE, THROUGHPUT_WINDOW_SECONDS } from './dashboard.constants.js';
import { isRunId, type RunFilters, type RunsQuery } from './dashboard-params.js';

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
        outbox: this.stats.dispatch
          ? { rows: row.outbox_rows, oldestMs: row.outbox_oldest_ms === null ? null : Number(row.outbox_oldest_ms) }
          : null,
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
    const params: RunListParams = [...runListFilters(query), query.after ?? query.before, query.limit + 1];
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
    return { run: toRunView(run, steps, this.stats.workflowVersions), steps, at: new Date() };
  }

  /** The kinds (and workflow names) and queues that have runs, or that clients registered. */
  async names(): Promise<DashboardNames> {
    const { rows } = await this.database.query(PICKER_NAMES, [PICKER_LIMIT]);
    return rows[0];
  }

  /** The clients running now, with the slots of each queue they serve and how many are in use. */
  async clients(): Promise<DashboardClients> {
    const { rows } = await this.database.query(LIST_CLIENTS, [CLIENT_STALE_AFTER_MS]);
    return {
      clients: rows.map((row) => ({
        id: row.id,
        host: row.host,
        pid: row.pid,
        queues: Object.entries(row.queues)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([name, slots]) => ({ name, slots, running: row.running[name] ?? 0 })),
        version: typeof row.info.version === 'string' ? row.info.version : null,
        startedAt: row.started_at,
        heartbeatAt: row.heartbeat_at,
      })),
      refreshIntervalSeconds: CLIENT_REFRESH_INTERVAL_MS / 1_000,
      at: new Date(),
    };
  }

  /** A queue's completed and failed steps per minute over the last hour; a busy minute is estimated from a sample. */
  async throughput(queue: string): Promise<DashboardThroughput> {
    const { rows } = await this.database.query(QUEUE_THROUGHPUT, [queue, THROUGHPUT_MINUTE_SAMPLE]);
    return { queue, minutes: rows.map(minuteOf), at: new Date() };
  }

  /** The app's schedules with their next and last ticks (client.listSchedules). */
  async schedules(): Promise<DashboardSchedules> {
    return { schedules: await this.client.listSchedules() };
  }
}

/**
 * One minute of a queue's chart. A minute with fewer finished steps than the
 * sample is counted. A busier one is estimated: the sample's rate (its steps
 * but those of its newest instant, over the time from its oldest to its
 * newest) over the span from the minute's first finished step to its last,
 * so a minute busy only part of the time is not taken as busy throughout.
 * Completions are written in batches that share a time: a sample that is one
 * batch has no rate, and counts as what it is, a lower bound.
 */
function minuteOf(row: ThroughputRow): DashboardThroughput['minutes'][number] {
  const { sampled, completed, failed } = row;
  if (sampled < THROUGHPUT_MINUTE_SAMPLE || row.first_to_oldest_s === null || row.first_to_newest_s === null) {
    return { at: row.minute, completed, failed, estimated: false };
  }
  const sampleSpan = row.first_to_newest_s - row.first_to_oldest_s;
  const total =
    sampleSpan > 0
      ? Math.max(sampled, Math.round(((sampled - row.at_newest!) / sampleSpan) * row.first_to_newest_s) + row.at_newest!)
      : sampled;
  return {
    at: row.minute,
    completed: Math.round((total * completed) / sampled),
    failed: Math.round((total * failed) / sampled),
    estimated: true,
  };
}

/** The runs list's filters as its statements take them: a time range as a range of run ids. */
export function runListFilters(filters: RunFilters): RunListFilters {
  const search = filters.search;
  return [
    filters.state,
    filters.kind,
    filters.queue,
    filters.from ? uuid7Floor(filters.from.getTime()) : null,
    filters.to ? uuid7Floor(filters.to.getTime() + 1) : null,
    search,
    search !== null && isRunId(search) ? search.toLowerCase() : null,
  ];
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

function toRunView(run: RunInfo, steps: StepInfo[], versions: ReadonlyMap<string, number>): DashboardRun['run'] {
  return {
    ...run,
    name: run.kind ?? run.workflow ?? '',
    type: run.workflow !== null ? 'workflow' : 'job',
    dueAt: dueAt(run, steps),
    versionHere: run.version === null || run.workflow === null ? null : (versions.get(run.workflow) ?? null),
  };
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
