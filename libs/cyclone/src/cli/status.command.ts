import type pg from 'pg';
import { execute } from '../database/statement.js';
import { planMigrations } from '../schema/migrator.js';
import { QUEUE_STATE, STRANDED_LEASES } from '../sql/health.sql.js';
import { PAUSED_QUEUES } from '../sql/workflow.sql.js';
import { LIST_PARTITIONS } from '../sql/partitions.sql.js';
import { CliError } from './cli-error.js';

/** Expired leases older than this are stranded: no live client is sweeping. */
const STRANDED_AFTER_MS = 10_000;

/**
 * `cyclone status`: applied and pending migrations, each queue's backlog and
 * oldest wait, paused queues, and leases no live client has reclaimed.
 */
export async function statusCommand(client: pg.Client, json: boolean, out: NodeJS.WritableStream): Promise<void> {
  const plan = await planMigrations(client);
  if (plan.applied.length === 0) {
    throw new CliError('no Cyclone schema in this database: apply it with `cyclone migrate`');
  }
  // One connection runs one query at a time.
  const queues = await execute(client, QUEUE_STATE, []);
  const stranded = await execute(client, STRANDED_LEASES, [STRANDED_AFTER_MS]);
  const paused = await execute(client, PAUSED_QUEUES, []);
  // Months that have ended: whether each still holds a run unfinished or within its retention.
  const partitions = await execute(client, LIST_PARTITIONS, [0]);
  const status = {
    migrations: { applied: plan.applied, pending: plan.pending.map((m) => m.version), unknown: plan.unknown },
    queues: queues.rows.map((q) => ({
      queue: q.queue,
      available: q.available,
      running: q.running,
      oldestAvailableMs: Number(q.oldest_available_ms),
      paused: q.paused,
    })),
    pausedQueues: paused.rows.map((r) => r.queue),
    strandedLeases: stranded.rows[0].stranded,
    partitions: partitions.rows.map((p) => ({
      name: p.name,
      month: p.month.toISOString().slice(0, 7),
      estimatedRuns: Math.round(p.estimated_runs),
      ended: p.ended_before,
      liveRuns: p.live_runs,
    })),
  };
  if (json) {
    out.write(`${JSON.stringify(status, null, 2)}\n`);
    return;
  }
  const { migrations } = status;
  out.write(
    `Migrations: applied ${migrations.applied.join(', ')}` +
      (migrations.pending.length > 0 ? `; pending ${migrations.pending.join(', ')} (run \`cyclone migrate\`)` : '; none pending') +
      (migrations.unknown.length > 0 ? `; unknown to this version: ${migrations.unknown.join(', ')}` : '') +
      '\n',
  );
  if (status.queues.length === 0) out.write('Queues: nothing due or running\n');
  else {
    out.write('Queues:\n');
    const rows = status.queues.map((q) => [
      q.queue,
      String(q.available),
      String(q.running),
      formatAge(q.oldestAvailableMs),
      q.paused ? 'paused' : '',
    ]);
    out.write(table(['queue', 'due', 'running', 'oldest due', ''], rows));
  }
  if (status.pausedQueues.length > 0) out.write(`Paused queues: ${status.pausedQueues.join(', ')}\n`);
  if (status.partitions.length > 0) {
    out.write('Partitions (month, runs by the last analyse, state):\n');
    const rows = status.partitions.map((p) => [
      p.month,
      String(p.estimatedRuns),
      !p.ended ? 'current or ahead' : p.liveRuns ? 'ended, kept: holds live runs' : 'ended, droppable',
    ]);
    out.write(table(['month', 'runs', 'state'], rows));
  }
  out.write(
    `Stranded leases: ${status.strandedLeases}` +
      (status.strandedLeases > 0 ? ' (expired and not reclaimed: is any Cyclone client running?)' : '') +
      '\n',
  );
}

function formatAge(ms: number): string {
  if (ms <= 0) return '-';
  if (ms < 1_000) return `${ms} ms`;
  if (ms < 120_000) return `${(ms / 1_000).toFixed(1)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `  ${cells.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd()}\n`;
  return [header, ...rows].map(line).join('');
}
