import type { Provider } from '@nestjs/common';
import pg from 'pg';
import { CycloneTestEnv, TestDatabase } from 'cyclone-nestjs/testing';
import { WORKER_SCRIPT, WorkerFleet, type FleetSettings, type WorkerProcess } from './worker-fleet.js';

/** The test side must not reclaim anything itself: its one poll tick is at startup. */
const NO_POLLING = ['60s', '61s'] as [string, string];

export interface CrashRigOptions {
  /** SQL that creates the test's own tables. */
  tables: string;
  /** The providers of the test's enqueue-only client (the steps and workflows it starts). */
  providers: Provider[];
  fleet: Omit<FleetSettings, 'databaseUrl'>;
  /** Worker processes started with the client. */
  workers?: number;
  script?: string;
  /** Called with each worker process the rig starts, to listen to it. */
  onSpawn?: (worker: WorkerProcess) => void;
}

/**
 * What a crash test runs on: a fresh database with the test's tables and
 * Cyclone's schema, a pool of the test's own on it, an enqueue-only client
 * that never polls, and worker processes started side by side with the
 * client (whichever migrates first, the others wait on the migration lock).
 * `close` takes it all down whatever the test did: the children first, then
 * the connections, then the database.
 */
export class CrashRig {
  private constructor(
    readonly database: TestDatabase,
    readonly pool: pg.Pool,
    readonly fleet: WorkerFleet,
    private readonly onSpawn: ((worker: WorkerProcess) => void) | undefined,
    private client?: CycloneTestEnv,
  ) {}

  get env(): CycloneTestEnv {
    return this.client!;
  }

  static async create(options: CrashRigOptions): Promise<CrashRig> {
    const script = options.script ?? WORKER_SCRIPT;
    WorkerFleet.assertBuilt(script);
    const database = await TestDatabase.create(process.env.CYCLONE_TEST_DATABASE_URL!);
    const pool = new pg.Pool({ connectionString: database.url, max: 4 });
    // Once ended, an idle connection whose close has not reached the server yet hears the FORCE
    // drop of close(); before that, an error of an idle connection is the test's failure.
    pool.on('error', (err) => {
      if (!pool.ending) throw err;
    });
    const rig = new CrashRig(database, pool, new WorkerFleet({ databaseUrl: database.url, ...options.fleet }, script), options.onSpawn);
    try {
      await pool.query(options.tables);
      for (let i = 0; i < (options.workers ?? 0); i++) rig.spawn();
      rig.client = await CycloneTestEnv.create({
        databaseUrl: database.url,
        isolate: false,
        runWorkers: false,
        pollInterval: NO_POLLING,
        providers: options.providers,
      });
      await Promise.all(rig.fleet.processes.map((w) => w.whenReady));
      return rig;
    } catch (err) {
      await rig.close();
      throw err;
    }
  }

  spawn(): WorkerProcess {
    const worker = this.fleet.spawn();
    this.onSpawn?.(worker);
    return worker;
  }

  async close(): Promise<void> {
    await this.fleet.killAll();
    await this.client?.close().catch(() => undefined);
    await this.pool.end().catch(() => undefined);
    await this.database.drop();
  }
}
