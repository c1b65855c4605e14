import { readFileSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '@nestjs/common';
import { EmbeddedDatabaseError } from '../errors/embedded-database.error.js';
import { messages } from '../cyclone.messages.js';

/**
 * Which process started the embedded server of a data directory, written
 * beside PostgreSQL's own postmaster.pid when the server is up. The server
 * runs in a session of its own (a terminal's Ctrl-C must not reach it before
 * the app's drain), so it outlives an app killed with SIGKILL; the next start
 * in the directory reads this file to tell such an orphan from a server that
 * a running app still uses.
 */
const OWNER_FILE = 'cyclone-owner.json';

interface Owner {
  /** The app's process. */
  app: number;
  /** The postmaster it started. */
  server: number;
}

/** How long an orphan gets for a fast shutdown (SIGINT), then for an immediate one (SIGQUIT). */
const FAST_STOP_MS = 30_000;
const IMMEDIATE_STOP_MS = 10_000;

export async function recordOwner(dir: string, server: number): Promise<void> {
  const owner: Owner = { app: process.pid, server };
  await writeFile(join(dir, OWNER_FILE), `${JSON.stringify(owner)}\n`);
}

export async function forgetOwner(dir: string): Promise<void> {
  await rm(join(dir, OWNER_FILE), { force: true });
}

/**
 * Makes the data directory free for a new server. A postmaster.pid naming a
 * live server is one of three things:
 * - a server this package started for an app that is gone (killed with
 *   SIGKILL, or crashed): an orphan, stopped here with a fast shutdown,
 *   which ends its connections and writes a checkpoint, so the new start
 *   finds the data as a clean stop leaves it. Stopped rather than reused:
 *   it may listen on another port than the one asked for now, was started
 *   with the settings and binaries of then, and as nobody's child its
 *   output and its end could not be followed;
 * - a server a running app still uses, or one this package did not start:
 *   refused, naming its pid, as before;
 * - no server at all (its pid is gone): PostgreSQL itself clears a stale file.
 */
export async function claimDirectory(dir: string, logger: Logger): Promise<void> {
  const postmaster = await readPostmaster(dir);
  if (!postmaster || !isRunning(postmaster.pid)) return;
  const owner = await readOwner(dir);
  const ours = owner !== null && owner.server === postmaster.pid && isPostgres(postmaster.pid, dir);
  if (!ours || isRunning(owner.app)) {
    throw new EmbeddedDatabaseError(messages.embeddedDirInUse(dir, postmaster.pid, postmaster.port, ours ? owner.app : null));
  }
  logger.warn(messages.embeddedOrphanStopping(dir, postmaster.pid, postmaster.port, owner.app));
  if (!(await stopProcess(postmaster.pid, dir, 'SIGINT', FAST_STOP_MS)) && !(await stopProcess(postmaster.pid, dir, 'SIGQUIT', IMMEDIATE_STOP_MS))) {
    throw new EmbeddedDatabaseError(messages.embeddedOrphanStuck(dir, postmaster.pid));
  }
  await forgetOwner(dir);
}

async function readPostmaster(dir: string): Promise<{ pid: number; port: string | undefined } | null> {
  let lines: string[];
  try {
    lines = (await readFile(join(dir, 'postmaster.pid'), 'utf8')).split('\n');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const pid = Number(lines[0]);
  return Number.isInteger(pid) && pid > 0 ? { pid, port: lines[3]?.trim() || undefined } : null;
}

async function readOwner(dir: string): Promise<Owner | null> {
  try {
    const owner = JSON.parse(await readFile(join(dir, OWNER_FILE), 'utf8')) as Partial<Owner>;
    return Number.isInteger(owner.app) && Number.isInteger(owner.server) ? (owner as Owner) : null;
  } catch {
    // Absent or unreadable: nothing says this package started the server.
    return null;
  }
}

/**
 * Whether a process exists and has not ended: a process whose parent has
 * not reaped it yet (a zombie) has ended. EPERM: it exists but belongs to
 * another user (the postgres user, when this process is not root).
 */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as { code?: string }).code !== 'EPERM') return false;
  }
  return procStat(pid)?.state !== 'Z';
}

/**
 * Where /proc tells (Linux), that the process is a postgres serving this
 * directory, so that a pid the system gave to another process since is never
 * signalled. Elsewhere the owner file's pids have to do.
 */
function isPostgres(pid: number, dir: string): boolean {
  let args: string[];
  try {
    args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ENOENT' || !procAvailable();
  }
  return /(^|\/)postgres$/.test(args[0]) && args.includes(dir);
}

function procAvailable(): boolean {
  try {
    readFileSync('/proc/self/stat');
    return true;
  } catch {
    return false;
  }
}

function procStat(pid: number): { state: string } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // pid (comm) state ...: comm may hold spaces and parentheses; the state follows the last ')'.
    return { state: stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) };
  } catch {
    return null;
  }
}

/** Signals the server and waits until it has ended and let go of the directory (postmaster.pid removed, or its process gone). */
async function stopProcess(pid: number, dir: string, signal: NodeJS.Signals, withinMs: number): Promise<boolean> {
  try {
    process.kill(pid, signal);
  } catch (err) {
    if ((err as { code?: string }).code === 'ESRCH') return true;
    throw err;
  }
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline) {
    if (!isRunning(pid) || (await readPostmaster(dir))?.pid !== pid) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}
