import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * A database of its own for one test environment, created on the server the
 * base URL points at and dropped when the environment closes, so tests (and
 * jest workers) never see each other's jobs.
 */
export class TestDatabase {
  private constructor(
    readonly url: string,
    private readonly baseUrl: string,
    private readonly name: string,
  ) {}

  static async create(baseUrl: string): Promise<TestDatabase> {
    const name = `cyclone_test_${randomBytes(6).toString('hex')}`;
    await withAdmin(baseUrl, (client) => client.query(`CREATE DATABASE ${name}`));
    const url = new URL(baseUrl);
    url.pathname = `/${name}`;
    return new TestDatabase(url.toString(), baseUrl, name);
  }

  async drop(): Promise<void> {
    await withAdmin(this.baseUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${this.name} WITH (FORCE)`));
  }
}

async function withAdmin<T>(baseUrl: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: baseUrl });
  // A connection the server ends (a restart, a terminated backend) fails the
  // statement under way, which tells the caller; the client's own 'error'
  // event for it must not go unheard, or it would crash the test process.
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
