import type pg from 'pg';
import { execute } from '../database/statement.js';
import { planMigrations } from '../schema/migrator.js';
import { QUEUE_STATE, STRANDED_LEASES } from '../sql/health.sql.js';
import { PAUSED_QUEUES } from '../sql/workflow.sql.js';
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
