import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../support/wait.js';

/** The repository root, from this file's place in test/crash/ (or .build/test/crash/). */
const ROOT = fileURLToPath(new URL(import.meta.url.includes('/.build/') ? '../../../' : '../../', import.meta.url));
/** The compiled worker; `npm test` builds it in its `pretest` step. */
export const WORKER_SCRIPT = join(ROOT, '.build/test/crash/crash-worker.js');
/** The flow-control worker (test/flow/flow-worker.ts): a limited step and schedules. */
export const FLOW_WORKER_SCRIPT = join(ROOT, '.build/test/flow/flow-worker.js');
/** The app of the server-restart test (test/crash/outage-app.ts): every connection of Cyclone busy at once. */
export const OUTAGE_APP_SCRIPT = join(ROOT, '.build/test/crash/outage-app.js');
/** The code workflow worker (test/crash/workflow-worker.ts). */
export const WORKFLOW_WORKER_SCRIPT = join(ROOT, '.build/test/crash/workflow-worker.js');
/** The broker dispatch fault worker (test/crash/dispatch-worker.ts). */
export const DISPATCH_WORKER_SCRIPT = join(ROOT, '.build/test/crash/dispatch-worker.js');

export interface FleetSettings {
  databaseUrl: string;
  leaseTtlMs: number;
  pollMs: [number, number];
  slots: number;
  /** The workers report each pass of their loops, for `waitForPasses`. */
  reportPasses?: boolean;
  /** The workers' `dispatch` option (broker dispatch, SPEC §17), passed as CRASH_DISPATCH; off when unset. */
  dispatch?: Record<string, unknown>;
}

export interface WorkerProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** The lease owner its steps carry in cyclone_steps.lease_owner, once ready. */
  owner?: string;
  ready: boolean;
  exited: boolean;
  readonly spawnedAt: number;
  /** How long it took from spawn to ready, once ready. */
  bootMs?: number;
  readonly whenReady: Promise<void>;
  readonly whenExited: Promise<void>;
  /** Passes of its loops that ended without failing, by loop name (`cyclone:claim`, `cyclone:recovery`, ...). */
  readonly passes: Map<string, number>;
}

/**
 * Worker processes started from the compiled crash worker. Every process it
 * started is SIGKILLed by `killAll`, which the tests call in afterAll/afterEach
 * whatever happened; the workers also exit by themselves when this process's
 * IPC channel goes away.
 */
export class WorkerFleet {
  readonly processes: WorkerProcess[] = [];
  /** The last lines every worker wrote, for the message of a failing test. */
  private readonly output: string[] = [];
  /** Lines written since the fleet started, kept or not. */
  private written = 0;

  constructor(
    private readonly settings: FleetSettings,
    private readonly script = WORKER_SCRIPT,
  ) {}

  /** Fails with instructions when the compiled worker is missing or older than its sources. */
  static assertBuilt(script = WORKER_SCRIPT): void {
    let built: number;
    try {
      built = statSync(script).mtimeMs;
    } catch {
      throw new Error(`${script} is missing: run the tests with \`npm test\`, whose pretest compiles into .build.`);
    }
    const newest = Math.max(
      ...['libs/cyclone/src', 'libs/cyclone/sql', 'libs/cyclone/migrations', 'test/crash', 'test/flow'].flatMap((dir) =>
        sourceTimes(join(ROOT, dir)),
      ),
    );
    if (newest > built) {
      throw new Error(
        `${script} is older than its sources: run the tests with \`npm test\` ` +
          '(or `npx tsc -p tsconfig.json --outDir .build --declaration false`) to rebuild it.',
      );
    }
  }

  spawn(extraEnv: Record<string, string> = {}): WorkerProcess {
    const { databaseUrl, leaseTtlMs, pollMs, slots, reportPasses = false, dispatch } = this.settings;
    // No --enable-source-maps: it adds most of a second to every start-up on a busy machine.
    const child = spawn(process.execPath, [this.script], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      env: {
        ...process.env,
        CRASH_DATABASE_URL: databaseUrl,
        CRASH_LEASE_TTL_MS: String(leaseTtlMs),
        CRASH_POLL_MIN_MS: String(pollMs[0]),
        CRASH_POLL_MAX_MS: String(pollMs[1]),
        CRASH_SLOTS: String(slots),
        CRASH_REPORT_PASSES: String(reportPasses),
        ...(dispatch ? { CRASH_DISPATCH: JSON.stringify(dispatch) } : {}),
        ...extraEnv,
      },
    });
    if (child.pid === undefined) throw new Error('Could not start a crash worker process');
    const pid = child.pid;
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        this.output.push(`[worker ${pid}] ${line}`);
        this.written += 1;
      }
      this.output.splice(0, Math.max(0, this.output.length - 200));
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);

    let worker!: WorkerProcess;
    const whenExited = new Promise<void>((resolve) =>
      child.once('exit', () => {
        worker.exited = true;
        worker.ready = false;
        resolve();
      }),
    );
    const passes = new Map<string, number>();
    child.on('message', (msg: { type?: string; loop?: string; failed?: boolean }) => {
      if (msg?.type === 'pass' && msg.loop && !msg.failed) passes.set(msg.loop, (passes.get(msg.loop) ?? 0) + 1);
    });
    const whenReady = new Promise<void>((resolve, reject) => {
      child.on('message', (msg: { type?: string; owner?: string }) => {
        if (msg?.type !== 'ready') return;
        worker.owner = msg.owner;
        worker.ready = true;
        worker.bootMs = Date.now() - worker.spawnedAt;
        resolve();
      });
      void whenExited.then(() => reject(new Error(`Worker ${pid} exited before it was ready:\n${this.tail()}`)));
    });
    whenReady.catch(() => undefined);
    worker = { child, pid, ready: false, exited: false, spawnedAt: Date.now(), whenReady, whenExited, passes };
    this.processes.push(worker);
    return worker;
  }

  /**
   * Waits until `n` passes of the worker's `loop` have begun after this call
   * and ended (one more than `n` ending, since one may have been under way:
   * a loop's passes never overlap; a worker process serves one queue).
   */
  async waitForPasses(worker: WorkerProcess, loop: string, n = 1, timeoutMs = 15_000): Promise<void> {
    if (!this.settings.reportPasses) throw new Error('waitForPasses needs a fleet made with reportPasses: true');
    const from = worker.passes.get(loop) ?? 0;
    await waitFor(
      `${n} passes of ${loop} in worker ${worker.pid}`,
      () => {
        if (worker.exited) throw new Error(`Worker ${worker.pid} exited:\n${this.tail()}`);
        return (worker.passes.get(loop) ?? 0) - from >= n + 1;
      },
      timeoutMs,
    );
  }

  live(): WorkerProcess[] {
    return this.processes.filter((w) => !w.exited);
  }

  /** Live workers whose Cyclone workers are running. */
  readyWorkers(): WorkerProcess[] {
    return this.processes.filter((w) => w.ready && !w.exited);
  }

  async kill(worker: WorkerProcess): Promise<void> {
    if (!worker.exited) worker.child.kill('SIGKILL');
    await worker.whenExited;
  }

  /** SIGKILLs every process this fleet started and waits for them to exit. */
  async killAll(): Promise<void> {
    await Promise.all(this.processes.map((w) => this.kill(w)));
  }

  tail(lines = 40): string {
    return this.output.slice(-lines).join('\n');
  }

  /** A mark for `since`: how many lines the workers have written so far. */
  mark(): number {
    return this.written;
  }

  /** The lines written after `mark` (as many of them as are kept). */
  since(mark: number): string[] {
    const count = Math.min(this.written - mark, this.output.length);
    return count > 0 ? this.output.slice(-count) : [];
  }
}

function sourceTimes(dir: string): number[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => statSync(join(e.parentPath, e.name)).mtimeMs);
}
