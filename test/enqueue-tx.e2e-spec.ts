import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { EntityManager, QueryRunner } from 'typeorm';
import {
  DuplicateError,
  InvalidInputError,
  NotInTransactionError,
  RunNotFoundError,
  Step,
  UnknownStepError,
} from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { countRows, expectCycloneError, rowsOfRun } from './support/e2e-helpers.js';
import { sql } from './support/sql.js';
import { waitFor } from './support/wait.js';

/** Order ids whose job has run. */
const processed: number[] = [];

@Injectable()
class Steps {
  @Step('process_order')
  async processOrder(input: { orderId: number }) {
    processed.push(input.orderId);
    return { orderId: input.orderId };
  }
}

class Rollback extends Error {}

describe('enqueueTx inside the caller\'s transaction', () => {
  let env: CycloneTestEnv;
  beforeAll(async () => {
    env = await CycloneTestEnv.create({ providers: [Steps], workers: 2 });
    await env.dataSource.query('CREATE TABLE orders (id serial PRIMARY KEY, label text NOT NULL)');
  });
  afterAll(async () => env?.close());

  /** The business write: an order row, in whatever transaction `db` belongs to. */
  async function insertOrder(db: EntityManager | QueryRunner, label: string): Promise<number> {
    const [row] = await db.query('INSERT INTO orders (label) VALUES ($1) RETURNING id', [label]);
    return row.id;
  }
  async function orderLabels(): Promise<string[]> {
    const rows: { label: string }[] = await env.dataSource.query('SELECT label FROM orders ORDER BY id');
    return rows.map((r) => r.label);
  }
  /** Runs `fn` in a QueryRunner transaction, committing or rolling back, and always releasing it. */
  async function withQueryRunner<T>(fn: (qr: QueryRunner) => Promise<T>, end: 'commit' | 'rollback'): Promise<T> {
    const qr = env.dataSource.createQueryRunner();
    await qr.connect();
    await qr.startTransaction();
    try {
      const value = await fn(qr);
      await (end === 'commit' ? qr.commitTransaction() : qr.rollbackTransaction());
      return value;
    } catch (err) {
      if (qr.isTransactionActive) await qr.rollbackTransaction();
      throw err;
    } finally {
      await qr.release();
    }
  }

  describe('with an EntityManager from dataSource.transaction', () => {
    it('the job is invisible and not run until the transaction commits, then it runs', async () => {
      let runId = '';
      let orderId = 0;
      await env.dataSource.transaction(async (manager) => {
        orderId = await insertOrder(manager, 'em-commit');
        runId = await env.client.enqueueTx(manager, 'process_order', { orderId });
        // Inside the transaction the job is there...
        const [{ count }] = await manager.query('SELECT count(*)::int AS count FROM cyclone_steps WHERE run_id = $1', [runId]);
        expect(count).toBe(1);
        // ...outside it is not, and workers cannot claim it.
        await expectCycloneError(env.client.getRun(runId), RunNotFoundError, 'run_not_found');
        await env.waitForPasses('cyclone:claim', 2);
        expect(processed).not.toContain(orderId);
      });
      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ orderId });
      expect(processed).toContain(orderId);
      expect(await orderLabels()).toContain('em-commit');
    });

    it('a rollback leaves neither the business row nor a run nor a step', async () => {
      const before = await countRows(env);
      let runId = '';
      await expect(
        env.dataSource.transaction(async (manager) => {
          const orderId = await insertOrder(manager, 'em-rollback');
          runId = await env.client.enqueueTx(manager, 'process_order', { orderId });
          throw new Rollback('payment declined');
        }),
      ).rejects.toBeInstanceOf(Rollback);
      expect(runId).not.toBe('');
      expect(await rowsOfRun(env, runId)).toEqual({ runs: 0, steps: 0 });
      expect(await countRows(env)).toEqual(before);
      expect(await orderLabels()).not.toContain('em-rollback');
      await expectCycloneError(env.client.getRun(runId), RunNotFoundError, 'run_not_found');
    });

    it('a unique key already held throws DuplicateError, and the transaction still commits its other writes', async () => {
      const holder = await env.client.enqueue('process_order', { orderId: -1 }, { unique: 'order-sync', processIn: '1h' });
      let runIdInTx: string | undefined;
      await env.dataSource.transaction(async (manager) => {
        await insertOrder(manager, 'dup-before');
        const dup = await expectCycloneError(
          env.client.enqueueTx(manager, 'process_order', { orderId: -2 }, { unique: 'order-sync' }),
          DuplicateError,
          'duplicate',
        );
        expect(dup.runId).toBe(holder);
        // The transaction is not aborted: more statements work.
        await insertOrder(manager, 'dup-after');
        runIdInTx = await env.client.enqueueTx(manager, 'process_order', { orderId: -3 }, { unique: 'other-key' });
      });
      expect(await orderLabels()).toEqual(expect.arrayContaining(['dup-before', 'dup-after']));
      await env.runUntilComplete(runIdInTx!);
      const [{ count }] = await env.dataSource.query(`SELECT count(*)::int AS count FROM cyclone_runs WHERE unique_key = 'order-sync'`);
      expect(count).toBe(1);
      await env.client.cancel(holder);
    });
  });

  describe('with a QueryRunner', () => {
    it('commit: the job exists and runs', async () => {
      const { runId, orderId } = await withQueryRunner(async (qr) => {
        const orderId = await insertOrder(qr, 'qr-commit');
        return { runId: await env.client.enqueueTx(qr, 'process_order', { orderId }), orderId };
      }, 'commit');
      await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ orderId });
    });

    it('rollback: no run and no step remain', async () => {
      const before = await countRows(env);
      const runId = await withQueryRunner(async (qr) => {
        const orderId = await insertOrder(qr, 'qr-rollback');
        return env.client.enqueueTx(qr, 'process_order', { orderId });
      }, 'rollback');
      expect(await rowsOfRun(env, runId)).toEqual({ runs: 0, steps: 0 });
      expect(await countRows(env)).toEqual(before);
      expect(await orderLabels()).not.toContain('qr-rollback');
    });

    it('a duplicate key within the same transaction names the run enqueued earlier in it; the transaction commits', async () => {
      const first = await withQueryRunner(async (qr) => {
        const first = await env.client.enqueueTx(qr, 'process_order', { orderId: -10 }, { unique: 'same-tx' });
        const dup = await expectCycloneError(
          env.client.enqueueTx(qr, 'process_order', { orderId: -11 }, { unique: 'same-tx' }),
          DuplicateError,
          'duplicate',
        );
        expect(dup.runId).toBe(first);
        await insertOrder(qr, 'same-tx-after-dup');
        return first;
      }, 'commit');
      expect(await orderLabels()).toContain('same-tx-after-dup');
      await expect(env.client.result(first, { timeout: 10_000 })).resolves.toEqual({ orderId: -10 });
      const [{ count }] = await env.dataSource.query(`SELECT count(*)::int AS count FROM cyclone_runs WHERE input = '{"orderId": -11}'`);
      expect(count).toBe(0);
    });
  });

  describe('a unique key held by a transaction not yet committed', () => {
    /** Opens a transaction holding `key`, starts a plain enqueue of the same key, then ends the transaction. */
    async function raceAgainstOpenTx(key: string, end: 'commit' | 'rollback') {
      let second: Promise<string> | undefined;
      let settled = false;
      const holder = await withQueryRunner(async (qr) => {
        const holder = await env.client.enqueueTx(qr, 'process_order', { orderId: -20 }, { unique: key, processIn: '1h' });
        second = env.client.enqueue('process_order', { orderId: -21 }, { unique: key, processIn: '1h' });
        second.then(
          () => (settled = true),
          () => (settled = true),
        );
        // The second enqueue waits for the holder's transaction to end: on its lock.
        await waitFor('the second enqueue to wait on a lock', async () => {
          const [{ waiting }] = await sql(
            env,
            `SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          );
          return waiting > 0;
        });
        expect(settled).toBe(false);
        return holder;
      }, end);
      return { holder, second: second! };
    }

    it('a concurrent enqueue waits, then throws DuplicateError with the committed holder', async () => {
      const { holder, second } = await raceAgainstOpenTx('race-commit', 'commit');
      const dup = await expectCycloneError(second, DuplicateError, 'duplicate');
      expect(dup.runId).toBe(holder);
      await env.client.cancel(holder);
    });

    it('a concurrent enqueue gets the key when the holder\'s transaction rolls back', async () => {
      const { holder, second } = await raceAgainstOpenTx('race-rollback', 'rollback');
      const runId = await second;
      expect(runId).not.toBe(holder);
      expect((await env.client.getRun(runId)).uniqueKey).toBe('race-rollback');
      expect(await rowsOfRun(env, holder)).toEqual({ runs: 0, steps: 0 });
      await env.client.cancel(runId);
    });
  });

  describe('without an open transaction', () => {
    it('enqueueTx throws NotInTransactionError and writes nothing', async () => {
      const before = await countRows(env);
      // The DataSource's own manager is not in a transaction.
      await expectCycloneError(
        env.client.enqueueTx(env.dataSource.manager, 'process_order', { orderId: 1 }),
        NotInTransactionError,
        'not_in_transaction',
      );
      // A connected QueryRunner before startTransaction.
      const qr = env.dataSource.createQueryRunner();
      await qr.connect();
      try {
        await expectCycloneError(env.client.enqueueTx(qr, 'process_order', { orderId: 2 }), NotInTransactionError, 'not_in_transaction');
      } finally {
        await qr.release();
      }
      // A manager kept after its transaction committed.
      let stale: EntityManager | undefined;
      await env.dataSource.transaction(async (manager) => void (stale = manager));
      await expectCycloneError(env.client.enqueueTx(stale!, 'process_order', { orderId: 3 }), NotInTransactionError, 'not_in_transaction');
      expect(await countRows(env)).toEqual(before);
    });

    it('a rejected enqueueTx (bad input, unknown kind) does not abort the caller\'s transaction', async () => {
      const before = await countRows(env);
      await env.dataSource.transaction(async (manager) => {
        await expectCycloneError(env.client.enqueueTx(manager, 'process_order', { orderId: 1n }), InvalidInputError, 'invalid_input');
        await expectCycloneError(env.client.enqueueTx(manager, 'no_such_kind', {}), UnknownStepError, 'unknown_step');
        await insertOrder(manager, 'after-rejected-enqueue');
      });
      expect(await orderLabels()).toContain('after-rejected-enqueue');
      expect(await countRows(env)).toEqual(before);
    });
  });
});
