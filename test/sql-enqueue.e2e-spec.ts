import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import pg from 'pg';
import { ENQUEUE_OPTION_NAMES, Step, type StepContext } from 'cyclone-nestjs';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { POLLING_OFF, firstPollTick, ownerOf } from './support/handler-probe.js';
import { sql } from './support/sql.js';

/**
 * cyclone_enqueue(kind, input, options) (SPEC §19): a job enqueued from SQL,
 * through psql-style statements and from a trigger, with the kind's
 * defaults that its client recorded at startup, the enqueue options of the
 * client by the same names and checks, the payload limit, and the client's
 * wake-up: a worker with polling off starts it at once. Every refusal names
 * what was wrong and writes nothing.
 */

const ran: { kind: string; input: unknown; attempt: number }[] = [];

@Injectable()
class SqlSteps {
  @Step('send_email', { queue: 'mail', priority: 3, maxAttempts: 4, timeout: '5m', retention: '2d', maxReclaims: 2, backoff: (n) => n * 1_000 })
  async send(input: unknown, ctx: StepContext) {
    ran.push({ kind: ctx.kind, input, attempt: ctx.attempt });
    return 'sent';
  }

  @Step('plain')
  async plain(input: unknown, ctx: StepContext) {
    ran.push({ kind: ctx.kind, input, attempt: ctx.attempt });
    return 'done';
  }

  @Step('per_tenant', { concurrency: { limit: 1, key: (input: { tenant: string }) => input.tenant } })
  async perTenant() {
    return 'done';
  }

  @Step('throttled', { rateLimit: { limit: 100, per: '1s' } })
  async throttled(input: unknown, ctx: StepContext) {
    ran.push({ kind: ctx.kind, input, attempt: ctx.attempt });
    return 'done';
  }
}

const MAX_PAYLOAD_BYTES = 2_048;

let env: CycloneTestEnv;
/** A connection of its own, as psql or another language's driver would hold. */
let psql: pg.Client;

beforeAll(async () => {
  // Polling off: a job is started at once only if its enqueue woke the workers.
  env = await CycloneTestEnv.create({
    providers: [SqlSteps],
    queues: { default: { workers: 2 }, mail: { workers: 2 } },
    pollInterval: POLLING_OFF,
    maxPayloadBytes: MAX_PAYLOAD_BYTES,
  });
  await firstPollTick(env);
  psql = new pg.Client({ connectionString: env.databaseUrl, application_name: 'cyclone-test' });
  await psql.connect();
});

afterAll(async () => {
  await psql?.end();
  await env?.close();
});

const enqueue = async (kind: string | null, input: unknown, options?: unknown): Promise<string> => {
  const args = options === undefined ? [kind, JSON.stringify(input)] : [kind, JSON.stringify(input), JSON.stringify(options)];
  const { rows } = await psql.query<{ id: string }>(
    `SELECT cyclone_enqueue($1, $2::jsonb${options === undefined ? '' : ', $3::jsonb'}) AS id`,
    args,
  );
  return rows[0].id;
};

/** What a job's rows hold, as an enqueue wrote them. */
async function written(runId: string) {
  const [row] = await sql(
    env,
    `SELECT r.kind, r.queue, r.input, r.unique_key, (extract(epoch FROM r.retention) * 1000)::bigint AS retention_ms,
            s.node_id, s.queue AS step_queue, s.priority, s.state, s.max_attempts, s.max_reclaims,
            (extract(epoch FROM s.timeout) * 1000)::bigint AS timeout_ms, s.backoff_ms, s.flow_key, s.rate_key,
            round(extract(epoch FROM s.scheduled_at - r.created_at))::int AS delay_s
       FROM cyclone_runs r JOIN cyclone_steps s ON s.run_id = r.id WHERE r.id = $1`,
    [runId],
  );
  return row;
}

const counts = async () =>
  (
    await sql(
      env,
      `SELECT (SELECT count(*)::int FROM cyclone_runs) AS runs, (SELECT count(*)::int FROM cyclone_steps) AS steps,
              (SELECT count(*)::int FROM cyclone_unique_keys) AS keys`,
    )
  )[0];

describe('cyclone_enqueue', () => {
  it('a client records its step kinds with their defaults when it starts', async () => {
    const kinds = await sql(env, 'SELECT * FROM cyclone_step_kinds ORDER BY kind');
    expect(kinds.map((k) => k.kind)).toEqual(['per_tenant', 'plain', 'send_email', 'throttled']);
    const byKind = new Map(kinds.map((k) => [k.kind, k]));
    expect(byKind.get('send_email')).toMatchObject({
      queue: 'mail',
      priority: 3,
      max_attempts: 4,
      timeout_ms: '300000',
      retention_ms: String(2 * 86_400_000),
      max_reclaims: 2,
      backoff_ms: ['1000', '2000', '3000'],
      flow_key: null,
      limit_key_option: null,
      max_payload_bytes: MAX_PAYLOAD_BYTES,
      registered_by: ownerOf(env),
    });
    expect(byKind.get('plain')).toMatchObject({ queue: 'default', priority: 0, max_attempts: 5, timeout_ms: null, backoff_ms: null });
    expect(byKind.get('per_tenant')).toMatchObject({ flow_key: null, limit_key_option: 'concurrency.key' });
    expect(byKind.get('throttled')).toMatchObject({ flow_key: '', limit_key_option: null });
  });

  it("writes the job as the client's enqueue does, with the kind's defaults and the options by the client's names", async () => {
    const options = { queue: 'mail', priority: -7, maxAttempts: 2, timeout: '1h30m', retention: 60_000, maxReclaims: 0, processIn: '90s' };
    const fromSql = await enqueue('send_email', { to: 'ada@example.com' }, options);
    const fromClient = await env.client.enqueue('send_email', { to: 'ada@example.com' }, options);
    const [a, b] = [await written(fromSql), await written(fromClient)];
    expect(a).toEqual(b);
    expect(a).toMatchObject({ priority: -7, max_attempts: 2, timeout_ms: '5400000', retention_ms: '60000', max_reclaims: 0, delay_s: 90 });

    // No options: every default is the kind's.
    // Both read once they have run: a worker of this client may have started either by then.
    const [viaSql, viaClient] = [
      await enqueue('send_email', { to: 'bob@example.com' }),
      await env.client.enqueue('send_email', { to: 'bob@example.com' }, { processIn: 0 }),
    ];
    for (const id of [viaSql, viaClient]) await env.client.result(id, { timeout: 10_000 });
    const [defaults, clientDefaults] = [await written(viaSql), await written(viaClient)];
    expect(defaults).toEqual(clientDefaults);
    expect(defaults).toMatchObject({ queue: 'mail', priority: 3, max_attempts: 4, max_reclaims: 2, timeout_ms: '300000' });
    // A kind-wide limit applies to a job enqueued from SQL as to the client's.
    expect(await written(await enqueue('throttled', 1, { processIn: '1h' }))).toMatchObject({ flow_key: '', rate_key: null });
    // processAt: an ISO time.
    const at = await enqueue('plain', null, { processAt: '2099-01-02T03:04:05Z' });
    const [{ scheduled_at }] = await sql(env, 'SELECT scheduled_at FROM cyclone_steps WHERE run_id = $1', [at]);
    expect(scheduled_at.toISOString()).toBe('2099-01-02T03:04:05.000Z');
  });

  it('wakes the queue on commit: a worker with polling off starts the job at once', async () => {
    const listener = new pg.Client({ connectionString: env.databaseUrl, application_name: 'cyclone-test' });
    await listener.connect();
    try {
      const wakes: string[] = [];
      listener.on('notification', (n) => wakes.push(n.payload ?? ''));
      await listener.query('LISTEN cyclone_wake');
      await psql.query('BEGIN');
      const [{ id }] = (await psql.query(`SELECT cyclone_enqueue('plain', '{"from": "psql"}') AS id`)).rows;
      await psql.query('SELECT pg_sleep(0.2)');
      expect(wakes).toEqual([]);
      await psql.query('COMMIT');
      // The next poll tick is a minute away: only the wake-up can start it this soon.
      await env.runUntilComplete(id, { timeout: 10_000 });
      expect(wakes).toContain('default');
      expect(ran).toContainEqual({ kind: 'plain', input: { from: 'psql' }, attempt: 1 });
    } finally {
      await listener.end();
    }
  });

  it('from a trigger: a job per business row, only if the row commits', async () => {
    await sql(
      env,
      `CREATE TABLE orders (id serial PRIMARY KEY, email text NOT NULL);
       CREATE FUNCTION orders_confirm() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         PERFORM cyclone_enqueue('send_email', jsonb_build_object('order', NEW.id, 'to', NEW.email),
                                 jsonb_build_object('unique', 'order-' || NEW.id));
         RETURN NEW;
       END $$;
       CREATE TRIGGER orders_confirm AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION orders_confirm();`,
    );
    await psql.query(`INSERT INTO orders (email) VALUES ('grace@example.com')`);
    const [{ id }] = await sql(env, `SELECT id FROM cyclone_runs WHERE unique_key = 'order-1'`);
    await env.runUntilComplete(id, { timeout: 10_000 });
    expect(ran).toContainEqual({ kind: 'send_email', input: { order: 1, to: 'grace@example.com' }, attempt: 1 });

    // The business write rolls back: so does its job.
    const before = await counts();
    await psql.query('BEGIN');
    await psql.query(`INSERT INTO orders (email) VALUES ('nobody@example.com')`);
    await psql.query('ROLLBACK');
    expect(await counts()).toEqual(before);
    // A refusal in the trigger refuses the business write with it.
    await sql(env, `DELETE FROM cyclone_step_kinds WHERE kind = 'send_email'`);
    try {
      await expect(psql.query(`INSERT INTO orders (email) VALUES ('late@example.com')`)).rejects.toMatchObject({ code: '42704' });
      expect(await counts()).toEqual(before);
      expect((await sql(env, 'SELECT count(*)::int AS n FROM orders'))[0].n).toBe(1);
    } finally {
      // A client that starts records it again (and its defaults: the last to start sets them).
      const replica = await CycloneTestEnv.create({
        providers: [SqlSteps],
        databaseUrl: env.databaseUrl,
        isolate: false,
        runWorkers: false,
        maxPayloadBytes: MAX_PAYLOAD_BYTES,
      });
      await replica.close();
    }
    expect((await sql(env, `SELECT count(*)::int AS n FROM cyclone_step_kinds WHERE kind = 'send_email'`))[0].n).toBe(1);
  });

  it('unique keys: an error naming the holder, or keep, replace and debounce as in the client', async () => {
    const holder = await enqueue('plain', { v: 1 }, { unique: 'report-7', processIn: '1h' });
    const duplicate = await psql.query(`SELECT cyclone_enqueue('plain', '{}', '{"unique": "report-7"}')`).catch((err) => err);
    expect(duplicate).toMatchObject({ code: '23505', detail: holder, message: expect.stringContaining(holder) });
    expect(await enqueue('plain', { v: 2 }, { unique: { key: 'report-7', onConflict: 'keep' } })).toBe(holder);
    expect(await enqueue('plain', { v: 3 }, { unique: { key: 'report-7', onConflict: 'replace' } })).toBe(holder);
    expect((await written(holder)).input).toEqual({ v: 3 });
    // The client sees the same holder.
    await expect(env.client.enqueue('plain', {}, { unique: { key: 'report-7', onConflict: 'keep' } })).resolves.toBe(holder);

    const debounced = await enqueue('plain', null, { unique: { key: 'digest', debounce: '10m' } });
    expect((await written(debounced)).delay_s).toBe(600);
    expect(await enqueue('plain', null, { unique: { key: 'digest', debounce: '20m' } })).toBe(debounced);
    const [{ delay }] = await sql(env, `SELECT round(extract(epoch FROM scheduled_at - now()))::int AS delay FROM cyclone_steps WHERE run_id = $1`, [debounced]);
    expect(delay).toBeGreaterThan(1_100);
  });

  it('knows the options the client knows', async () => {
    const refused = await psql.query(`SELECT cyclone_enqueue('plain', '{}', '{"priorty": 1}')`).catch((err) => err);
    const known = /Known options: (.*)\.$/.exec(refused.message)![1].split(', ');
    expect(known).toEqual([...ENQUEUE_OPTION_NAMES]);
  });

  const REFUSALS: [string, string | null, unknown, unknown, string, RegExp][] = [
    ['a kind no client registered', 'no_such_kind', {}, {}, '42704', /no client has registered step kind 'no_such_kind'/],
    ['a null kind', null, {}, {}, '42704', /step kind NULL/],
    ['a kind keyed by a JavaScript function', 'per_tenant', { tenant: 'a' }, {}, '0A000', /concurrency\.key is a JavaScript function/],
    ['options that are not an object', 'plain', {}, ['queue'], '22023', /options must be a JSON object/],
    ['an unknown option', 'plain', {}, { queu: 'x' }, '22023', /unknown option "queu"/],
    ['an unknown unique option', 'plain', {}, { unique: { key: 'k', mode: 'x' } }, '22023', /unknown option "mode" in "unique"/],
    ['an empty queue', 'plain', {}, { queue: ' ' }, '22023', /option "queue" must be a non-empty string/],
    ['a queue that is not text', 'plain', {}, { queue: 5 }, '22023', /option "queue"/],
    ['a long queue', 'plain', {}, { queue: 'q'.repeat(201) }, '22023', /option "queue"/],
    ['a fractional priority', 'plain', {}, { priority: 1.5 }, '22023', /option "priority" must be an integer from -1000 to 1000; got 1\.5/],
    ['a priority out of range', 'plain', {}, { priority: 1001 }, '22023', /option "priority"/],
    ['a priority given as text', 'plain', {}, { priority: '1' }, '22023', /option "priority"/],
    ['a null option', 'plain', {}, { priority: null }, '22023', /option "priority"/],
    ['no attempts', 'plain', {}, { maxAttempts: 0 }, '22023', /option "maxAttempts" must be an integer from 1 to 1000/],
    ['negative reclaims', 'plain', {}, { maxReclaims: -1 }, '22023', /option "maxReclaims"/],
    ['an unreadable duration', 'plain', {}, { processIn: 'soon' }, '22023', /option "processIn" must be a non-negative number of milliseconds/],
    ['a negative duration', 'plain', {}, { retention: -5 }, '22023', /option "retention"/],
    ['a zero timeout', 'plain', {}, { timeout: '0s' }, '22023', /option "timeout" must be greater than zero/],
    ['a duration past 100 years', 'plain', {}, { processIn: '40000d' }, '22023', /option "processIn" must be at most/],
    ['processAt and processIn', 'plain', {}, { processAt: '2099-01-01T00:00:00Z', processIn: 5 }, '22023', /"processAt" and "processIn" cannot be used together/],
    ['a processAt that is no time', 'plain', {}, { processAt: 'tomorrow' }, '22023', /option "processAt" must be an ISO 8601 time/],
    ['a processAt out of range', 'plain', {}, { processAt: '2026-13-45' }, '22023', /option "processAt"/],
    ['a unique key that is not text', 'plain', {}, { unique: 7 }, '22023', /option "unique" must be a string key/],
    ['an empty unique key', 'plain', {}, { unique: { key: '' } }, '22023', /option "unique\.key"/],
    ['a bad onConflict', 'plain', {}, { unique: { key: 'k', onConflict: 'merge' } }, '22023', /option "unique\.onConflict" must be 'error', 'keep' or 'replace'/],
    ['a debounce with onConflict error', 'plain', {}, { unique: { key: 'k', debounce: '1s', onConflict: 'error' } }, '22023', /cannot go with onConflict 'error'/],
    ['an input over the payload limit', 'plain', 'x'.repeat(MAX_PAYLOAD_BYTES), {}, '54000', /over the limit of 2048 bytes of step kind 'plain'/],
  ];

  it.each(REFUSALS)('refuses %s, naming it, and writes nothing', async (_what, kind, input, options, code, message) => {
    const before = await counts();
    const refused = await psql
      .query('SELECT cyclone_enqueue($1, $2::jsonb, $3::jsonb)', [kind, JSON.stringify(input), JSON.stringify(options)])
      .then(() => null, (err: pg.DatabaseError) => err);
    expect(refused).toMatchObject({ code, message: expect.stringMatching(message) });
    expect(await counts()).toEqual(before);
  });

  it('refuses an input nested deeper than the client allows, and writes nothing', async () => {
    const before = await counts();
    const deep = `${'['.repeat(1_001)}${']'.repeat(1_001)}`;
    await expect(psql.query(`SELECT cyclone_enqueue('plain', $1::jsonb)`, [deep])).rejects.toMatchObject({
      code: '54000',
      message: expect.stringMatching(/nested more than 1000 levels/),
    });
    expect(await counts()).toEqual(before);
    // One level less goes in, as it would from the client.
    const shallow = `${'['.repeat(1_000)}${']'.repeat(1_000)}`;
    await expect(enqueue('plain', JSON.parse(shallow), { processIn: '1h' })).resolves.toMatch(/^[0-9a-f-]{36}$/);
  });

  it('a run id made in SQL is a time-ordered UUIDv7 in this month, as the client makes them', async () => {
    const before = Date.now();
    const id = await enqueue('plain', null, { processIn: '1h' });
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const ms = parseInt(id.replace(/-/g, '').slice(0, 12), 16);
    expect(Math.abs(ms - before)).toBeLessThan(60_000);
  });
});
