import { connect, createServer, type Server, type Socket } from 'node:net';

/** PostgreSQL's ReadyForQuery message type: the server sends it once a statement has finished (and committed). */
const READY_FOR_QUERY = 0x5a;

interface Pair {
  client: Socket;
  server: Socket;
}

interface Cut {
  marker: string;
  done: () => void;
}

/**
 * A TCP proxy in front of a PostgreSQL server, for network faults between
 * Cyclone and the server without stopping the server:
 * - `down()` stops listening (connections are refused) and cuts every open
 *   connection, as a crashed server would; `up()` listens again on the same
 *   port, as the server coming back;
 * - `cutAfterCommit(marker)` lets the next statement whose message holds
 *   `marker` (its SQL text, or a prepared statement's name) reach the server
 *   and finish, then cuts that connection just before the server's
 *   ReadyForQuery reaches the client: the statement committed, and the
 *   client hears only that the connection ended.
 */
export class TcpProxy {
  private server?: Server;
  private readonly pairs = new Set<Pair>();
  private cuts: Cut[] = [];
  /** Connections accepted so far. */
  accepted = 0;

  private constructor(
    private readonly target: URL,
    readonly port: number,
  ) {}

  static async start(targetUrl: string): Promise<TcpProxy> {
    const probe = await listen(createServer(), 0);
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const proxy = new TcpProxy(new URL(targetUrl), port);
    await proxy.up();
    return proxy;
  }

  /** The target's URL, through the proxy. */
  get url(): string {
    const url = new URL(this.target.toString());
    url.hostname = '127.0.0.1';
    url.port = String(this.port);
    return url.toString();
  }

  /** The URL of another database on the same server, through the proxy. */
  urlFor(database: string): string {
    const url = new URL(this.url);
    url.pathname = `/${database}`;
    return url.toString();
  }

  async up(): Promise<void> {
    if (this.server) return;
    this.server = await listen(
      createServer((client) => this.accept(client)),
      this.port,
    );
  }

  /** Refuses new connections and cuts the open ones. */
  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const pair of this.pairs) this.cut(pair);
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Resolves once a statement holding `marker` has committed and its connection was cut. */
  cutAfterCommit(marker: string): Promise<void> {
    return new Promise((resolve) => this.cuts.push({ marker, done: resolve }));
  }

  async close(): Promise<void> {
    await this.down();
  }

  private accept(client: Socket): void {
    this.accepted += 1;
    const server = connect({ host: this.target.hostname, port: Number(this.target.port || 5432) });
    const pair = { client, server };
    this.pairs.add(pair);
    let armed: Cut | undefined;
    let pending = Buffer.alloc(0);
    client.on('data', (chunk) => {
      if (!armed && this.cuts.length > 0) {
        const text = chunk.toString('latin1');
        const index = this.cuts.findIndex((c) => text.includes(c.marker));
        if (index >= 0) [armed] = this.cuts.splice(index, 1);
      }
      server.write(chunk);
    });
    server.on('data', (chunk) => {
      if (!armed) {
        client.write(chunk);
        return;
      }
      // Read whole messages (type byte, int32 length) until ReadyForQuery, which is not let through.
      pending = Buffer.concat([pending, chunk]);
      let offset = 0;
      while (pending.length - offset >= 5) {
        const type = pending[offset];
        const length = pending.readInt32BE(offset + 1);
        if (pending.length - offset < 1 + length) break;
        if (type === READY_FOR_QUERY) {
          // Nothing of the answer reaches the client.
          const cut = armed;
          this.cut(pair);
          cut.done();
          return;
        }
        offset += 1 + length;
      }
    });
    const end = () => this.cut(pair);
    client.on('error', end);
    server.on('error', end);
    client.on('close', end);
    server.on('close', end);
  }

  private cut(pair: Pair): void {
    if (!this.pairs.delete(pair)) return;
    pair.client.destroy();
    pair.server.destroy();
  }
}

function listen(server: Server, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}
