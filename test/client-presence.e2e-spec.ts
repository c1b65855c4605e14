import { describe, it, expect } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { Step } from 'cyclone-nestjs';
import { ClientPresenceMaintainer } from '../libs/cyclone/src/maintenance/client-presence.maintainer.js';
import { HandlerProbe, ownerOf, testEnvs } from './support/handler-probe.js';
import { sql } from './support/sql.js';

/**
 * The clients running now (SPEC §19), in cyclone_clients: each client's row
 * from its start to its shutdown, refreshed on a loop by one statement that
 * also ages out the rows of clients that stopped refreshing.
 */

@Injectable()
class PresenceSteps {
  @Step('report', { queue: 'reports' })
  async report() {
    return 'done';
  }
}

const { createEnv, replicaOf } = testEnvs([PresenceSteps], new HandlerProbe());
const VERSION = (JSON.parse(readFileSync(new URL('../libs/cyclone/package.json', import.meta.url), 'utf8')) as { version: string }).version;

const clients = async (url: string) =>
  sql<{ id: string; host: string; pid: number; queues: Record<string, number>; info: { version: string }; heartbeat_at: Date }>(
    url,
    'SELECT id, host, pid, queues, info, heartbeat_at FROM cyclone_clients ORDER BY started_at',
  );

describe('the clients running now', () => {
  it('each client has a row from its start to its shutdown: id, host, pid, the queues it serves and their slots', async () => {
    const env = await createEnv({ queues: { default: { workers: 3 }, reports: { workers: 1 } } });
    const producer = await replicaOf(env, { runWorkers: false });
    expect(await clients(env.databaseUrl)).toEqual([
      { id: ownerOf(env), host: hostname(), pid: process.pid, queues: { default: 3, reports: 1 }, info: { version: VERSION }, heartbeat_at: expect.any(Date) },
      { id: ownerOf(producer), host: hostname(), pid: process.pid, queues: {}, info: { version: VERSION }, heartbeat_at: expect.any(Date) },
    ]);
    await producer.close();
    expect((await clients(env.databaseUrl)).map((c) => c.id)).toEqual([ownerOf(env)]);
  });

  it('a refresh moves its heartbeat on and ages out the clients that stopped refreshing', async () => {
    const env = await createEnv();
    // A client killed half a minute ago, and one that refreshed a moment ago.
    await sql(
      env,
      `INSERT INTO cyclone_clients (id, host, pid, heartbeat_at)
       VALUES ('gone:1:dead', 'elsewhere', 1, now() - interval '31 seconds'), ('alive:2:well', 'elsewhere', 2, now() - interval '5 seconds')`,
    );
    const [before] = (await clients(env.databaseUrl)).filter((c) => c.id === ownerOf(env));
    await env.app.get(ClientPresenceMaintainer).refresh();
    const after = await clients(env.databaseUrl);
    expect(after.map((c) => c.id).sort()).toEqual(['alive:2:well', ownerOf(env)].sort());
    expect(after.find((c) => c.id === ownerOf(env))!.heartbeat_at.getTime()).toBeGreaterThan(before.heartbeat_at.getTime());
  });

  it("a client whose row was removed puts it back at its next refresh", async () => {
    const env = await createEnv();
    await sql(env, 'DELETE FROM cyclone_clients');
    await env.app.get(ClientPresenceMaintainer).refresh();
    expect((await clients(env.databaseUrl)).map((c) => c.id)).toEqual([ownerOf(env)]);
  });
});
