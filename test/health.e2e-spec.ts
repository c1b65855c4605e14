import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Step } from 'cyclone-nestjs';
import { CycloneHealthIndicator, CycloneHealthModule } from 'cyclone-nestjs/health';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';

@Injectable()
class Steps {
  @Step('noop')
  async noop() {
    return null;
  }
}

describe('CycloneHealthIndicator', () => {
  let env: CycloneTestEnv;
  let indicator: CycloneHealthIndicator;

  beforeAll(async () => {
    env = await CycloneTestEnv.create({ providers: [Steps], imports: [CycloneHealthModule] });
    indicator = env.app.get(CycloneHealthIndicator);
  });
  afterAll(async () => env?.close());

  async function insertStep(queue: string, sql: string): Promise<void> {
    const runId = await env.client.enqueue('noop', null, { queue, processIn: '1h' });
    await env.dataSource.query(`UPDATE cyclone_steps SET ${sql} WHERE run_id = $1`, [runId]);
  }

  it('is up with the database, listener and poll loop all working', async () => {
    const result = await indicator.isHealthy('cyclone');
    expect(result.cyclone.status).toBe('up');
    expect(result.cyclone).toMatchObject({
      database: 'up',
      listener: 'connected',
      leases: { stranded: 0, heartbeatFailures: 0 },
    });
    expect((result.cyclone as any).loops.poll.lastTickAgeMs).toBeLessThan(5_000);
  });

  it('reports a queue whose oldest due step waited past maxQueueAge as degraded, with its counts', async () => {
    await insertStep('unserved', `scheduled_at = now() - interval '10 minutes'`);
    const result = await indicator.isHealthy('cyclone', { maxQueueAge: '5m' });
    expect(result.cyclone.status).toBe('degraded');
    const queue = (result.cyclone as any).queues.unserved;
    expect(queue.available).toBe(1);
    expect(queue.oldestAvailableMs).toBeGreaterThanOrEqual(9 * 60_000);
    expect((result.cyclone as any).backlogged).toEqual(['unserved']);
    // A generous threshold makes the same backlog acceptable.
    expect((await indicator.isHealthy('cyclone', { maxQueueAge: '1h' })).cyclone.status).toBe('up');
    await env.dataSource.query(`DELETE FROM cyclone_steps; DELETE FROM cyclone_runs`);
  });

  it('shows a paused queue as paused, and its backlog as expected rather than degraded', async () => {
    await insertStep('held_back', `scheduled_at = now() - interval '10 minutes'`);
    expect(await env.client.pauseQueue('held_back')).toBe(true);
    try {
      const result = await indicator.isHealthy('cyclone', { maxQueueAge: '5m' });
      expect(result.cyclone.status).toBe('up');
      expect((result.cyclone as any).queues.held_back).toMatchObject({ available: 1, paused: true });
      // Resumed, the same backlog is a fault again.
      await env.client.resumeQueue('held_back');
      const resumed = await indicator.isHealthy('cyclone', { maxQueueAge: '5m' });
      expect(resumed.cyclone.status).toBe('degraded');
      expect((resumed.cyclone as any).queues.held_back.paused).toBe(false);
    } finally {
      await env.client.resumeQueue('held_back');
      await env.dataSource.query(`DELETE FROM cyclone_steps; DELETE FROM cyclone_runs`);
    }
  });

  it('is down while a running step keeps an expired lease that nobody reclaims', async () => {
    await insertStep(
      'unserved',
      `state = 'running', lease_owner = 'dead-worker', lease_generation = 1, started_at = now() - interval '1 minute',
       lease_expiry = now() - interval '1 minute'`,
    );
    const result = await indicator.isHealthy('cyclone');
    expect(result.cyclone.status).toBe('down');
    expect((result.cyclone as any).leases.stranded).toBe(1);
    await env.dataSource.query(`DELETE FROM cyclone_steps; DELETE FROM cyclone_runs`);
    expect((await indicator.isHealthy('cyclone')).cyclone.status).toBe('up');
  });

  it('is down when the database does not answer within the timeout', async () => {
    const runner = env.dataSource.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    try {
      // Holding this lock makes every query on the steps table wait.
      await runner.query('LOCK TABLE cyclone_steps IN ACCESS EXCLUSIVE MODE');
      const started = Date.now();
      const result = await indicator.isHealthy('cyclone', { timeout: 500 });
      expect(result.cyclone.status).toBe('down');
      expect(result.cyclone).toMatchObject({ database: 'unreachable' });
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  });
});
