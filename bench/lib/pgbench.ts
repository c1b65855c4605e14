import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { BenchServer } from './server.js';

const run = promisify(execFile);

export const PGBENCH_DB = 'pgbench';

function env(server: BenchServer): NodeJS.ProcessEnv {
  return { ...process.env, PGPASSWORD: server.password };
}

function conn(server: BenchServer): string[] {
  return ['-h', server.host, '-p', String(server.port), '-U', server.user];
}

export async function pgbenchVersion(): Promise<string> {
  try {
    const { stdout } = await run('pgbench', ['--version']);
    return stdout.trim();
  } catch {
    return 'not found';
  }
}

export async function pgbenchInit(server: BenchServer, scale: number): Promise<void> {
  await run('pgbench', [...conn(server), '-i', '-q', '-s', String(scale), PGBENCH_DB], {
    env: env(server),
    maxBuffer: 16 * 1024 * 1024,
  });
}

export interface PgbenchResult {
  tps: number;
  latencyMs: number;
  transactions: number;
  command: string;
}

/** The simple-update script (-N): one UPDATE, one SELECT, one INSERT per transaction, each a real commit. */
export async function pgbenchRun(server: BenchServer, clients: number, seconds: number): Promise<PgbenchResult> {
  const args = ['-N', '-M', 'prepared', '-c', String(clients), '-j', String(Math.min(clients, 2)), '-T', String(seconds)];
  const { stdout } = await run('pgbench', [...conn(server), ...args, PGBENCH_DB], {
    env: env(server),
    maxBuffer: 16 * 1024 * 1024,
  });
  const tps = /tps = ([\d.]+)/.exec(stdout);
  const latency = /latency average = ([\d.]+) ms/.exec(stdout);
  const tx = /number of transactions actually processed: (\d+)/.exec(stdout);
  if (!tps) throw new Error(`could not read pgbench output:\n${stdout}`);
  return {
    tps: Number(tps[1]),
    latencyMs: latency ? Number(latency[1]) : NaN,
    transactions: tx ? Number(tx[1]) : NaN,
    command: `pgbench ${args.join(' ')}`,
  };
}
