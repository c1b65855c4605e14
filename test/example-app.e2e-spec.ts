import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { NestFactory } from '@nestjs/core';
import type { INestApplication } from '@nestjs/common';
import { CycloneClient, CycloneDatabase } from '../libs/cyclone/src/index.js';
import { TestDatabase } from '../libs/cyclone/src/testing/index.js';
import { AppModule } from '../src/app.module.js';

/** The example app as deployed: real HTTP, CYCLONE_DATABASE_URL pointing at a fresh database. */
describe('example app', () => {
  let database: TestDatabase;
  let app: INestApplication;
  let base: string;
  const savedUrl = process.env.CYCLONE_DATABASE_URL;

  beforeAll(async () => {
    database = await TestDatabase.create(process.env.CYCLONE_TEST_DATABASE_URL!);
    process.env.CYCLONE_DATABASE_URL = database.url;
    app = await NestFactory.create(AppModule, { logger: ['error'] });
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  });

  afterAll(async () => {
    await app?.close();
    await database?.drop();
    if (savedUrl === undefined) delete process.env.CYCLONE_DATABASE_URL;
    else process.env.CYCLONE_DATABASE_URL = savedUrl;
  });

  const post = (path: string, body: unknown) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  async function emailRunsTo(to: string): Promise<{ id: string; state: string }[]> {
    return app
      .get(CycloneDatabase)
      .dataSource.query(`SELECT id, state FROM cyclone_runs WHERE kind = 'send_email' AND input->>'to' = $1`, [to]);
  }

  it('serves GET /health from real queries', async () => {
    const response = await fetch(`${base}/health`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as any;
    expect(body.status).toBe('ok');
    expect(body.info.cyclone).toMatchObject({ status: 'up', database: 'up', listener: 'connected' });
  });

  it('builds a report through the API and then emails it', async () => {
    const response = await post('/reports', { userId: 7, email: 'ada@example.com', period: '2026-11' });
    expect(response.status).toBe(202);
    const { runId } = (await response.json()) as { runId: string };
    const result = (await (await fetch(`${base}/reports/${runId}/result`)).json()) as any;
    expect(result).toMatchObject({ userId: 7, period: '2026-11' });
    expect(result.orders).toBeGreaterThan(0);
    const [email] = await emailRunsTo('ada@example.com');
    await expect(app.get(CycloneClient).result(email.id, { timeout: 10_000 })).resolves.toBeNull();
  });

  it('refuses a second report for the same user and period while the first is queued', async () => {
    const input = { userId: 8, email: 'bob@example.com', period: '2026-10' };
    const first = await post('/reports', input);
    const second = await post('/reports', input);
    expect(first.status).toBe(202);
    expect(second.status).toBe(409);
    const body = (await second.json()) as any;
    expect(body).toMatchObject({ code: 'duplicate', runId: ((await first.json()) as any).runId });
  });

  it('signs a user up and queues the welcome email in the same transaction', async () => {
    const first = await post('/users', { email: 'cy@example.com' });
    expect(first.status).toBe(201);
    const user = (await first.json()) as any;
    await expect(app.get(CycloneClient).result(user.welcomeRunId, { timeout: 10_000 })).resolves.toBeNull();

    // The same address again: the insert fails, so no second email is queued.
    const again = await post('/users', { email: 'cy@example.com' });
    expect(again.status).toBe(409);
    expect(await emailRunsTo('cy@example.com')).toHaveLength(1);
  });
});
