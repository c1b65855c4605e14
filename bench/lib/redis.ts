/**
 * The benchmark's own Redis for broker dispatch (`--dispatch=redis`): a
 * redis-server on a free loopback port, with nothing ever written to disk
 * (`--save '' --appendonly no`), emptied before every run that uses it so that
 * each run starts on a fresh Redis as it starts on a fresh database. Spoken to
 * in RESP by hand: the orchestrator needs three commands, not a client.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

export interface BenchRedis {
  url: string;
  port: number;
  /** redis_version of INFO server, for the report. */
  version: string;
  /** FLUSHALL: streams, consumer groups and Cyclone's epoch and shard keys all go. */
  flush(): Promise<void>;
  /** Commands the server has processed since it started (INFO stats), to count what an idle fleet asks of it. */
  commandsProcessed(): Promise<number>;
  stop(): Promise<void>;
}

/** redis-server from BENCH_REDIS_SERVER, else the first on PATH (Debian's package puts it in /usr/bin). */
function redisServerBinary(): string {
  const executable = (path: string) => {
    try {
      accessSync(path, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  const candidates = process.env.BENCH_REDIS_SERVER
    ? [process.env.BENCH_REDIS_SERVER]
    : (process.env.PATH ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, 'redis-server'));
  const found = candidates.find(executable);
  if (!found) throw new Error('--dispatch=redis needs redis-server (apt-get install -y redis-server, or set BENCH_REDIS_SERVER)');
  return found;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * One command in RESP's inline form, and its reply as text: a simple string
 * ("+OK"), an error ("-ERR …") or a bulk string's content (INFO).
 */
export function redisCommand(port: number, command: string, timeoutMs = 2_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let reply = Buffer.alloc(0);
    const done = (err: Error | undefined, text?: string) => {
      socket.destroy();
      if (err) reject(err);
      else resolve(text!);
    };
    socket.setTimeout(timeoutMs, () => done(new Error(`redis ${command}: no reply in ${timeoutMs} ms`)));
    socket.once('error', (err) => done(err));
    socket.once('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (chunk) => {
      reply = Buffer.concat([reply, chunk]);
      const eol = reply.indexOf('\r\n');
      if (eol < 0) return;
      const head = reply.subarray(0, eol).toString('latin1');
      if (head.startsWith('$')) {
        // A bulk string: wait for its whole length.
        const length = Number(head.slice(1));
        if (reply.length >= eol + 2 + length) done(undefined, reply.subarray(eol + 2, eol + 2 + length).toString('utf8'));
      } else {
        done(undefined, head);
      }
    });
  });
}

/** Starts the private redis-server and resolves once it answers PING. */
export async function startRedis(log: (line: string) => void): Promise<BenchRedis> {
  const binary = redisServerBinary();
  const dir = mkdtempSync(join(tmpdir(), 'cyclone-bench-redis-'));
  const port = await freePort();
  const child: ChildProcess = spawn(
    binary,
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--logfile', join(dir, 'redis.log'), '--daemonize', 'no']
      // Nothing to disk: no snapshots, no append-only file.
      .concat(['--save', '', '--appendonly', 'no']),
    { stdio: 'ignore' },
  );
  // However the bench ends, the server goes with it.
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  let exited: string | undefined;
  child.once('exit', (code, signal) => (exited = signal ?? `code ${code}`));
  const logTail = () => {
    try {
      return readFileSync(join(dir, 'redis.log'), 'utf8').trim().split('\n').slice(-3).join(' | ');
    } catch {
      return '(no log)';
    }
  };
  for (let tries = 1; ; tries++) {
    if (exited !== undefined) throw new Error(`redis-server on port ${port} exited (${exited}): ${logTail()}`);
    if ((await redisCommand(port, 'PING', 500).catch(() => '')) === '+PONG') break;
    if (tries >= 500) {
      kill();
      throw new Error(`redis-server on port ${port} did not answer PING: ${logTail()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const version = /redis_version:(\S+)/.exec(await redisCommand(port, 'INFO server'))?.[1] ?? 'unknown';
  log(`Redis ${version} (${binary}) on port ${port}, no persistence`);
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    version,
    flush: async () => {
      const reply = await redisCommand(port, 'FLUSHALL');
      if (reply !== '+OK') throw new Error(`redis FLUSHALL: ${reply}`);
    },
    commandsProcessed: async () => Number(/total_commands_processed:(\d+)/.exec(await redisCommand(port, 'INFO stats'))?.[1] ?? NaN),
    stop: async () => {
      process.off('exit', kill);
      if (exited === undefined) {
        const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGTERM');
        await gone;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
