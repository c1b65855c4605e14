import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import pg from 'pg';
import { IDLE_CHANNEL, OUTBOX_CHANNEL, RUN_FINISHED_CHANNEL, TIMER_CHANNEL, WAKE_CHANNEL, type Channel } from '../sql/names.js';
import { CycloneDatabase } from '../database/cyclone-database.js';
import { WAKE_QUEUES } from '../sql/enqueue.sql.js';
import { execute } from '../database/statement.js';
import { CycloneStats } from '../runtime/cyclone-stats.js';
import { CYCLONE_OPTIONS } from '../cyclone.constants.js';
import type { ResolvedOptions } from '../options/resolved-options.js';

type Listener = (payload: string) => void;

const RECONNECT_MIN_MS = 100;

/**
 * The LISTEN connection: one dedicated client per app, outside the pool, since
 * a pooled connection would be handed to other queries. It reconnects with
 * backoff when the connection drops, the backoff never longer than the
 * longest poll interval: the connection is back within one poll tick of the
 * server's return, however long the outage was, while a server that stays
 * away is tried no more often than the poller tries it. While it is down,
 * polling keeps jobs moving, and on reconnect every subscriber is told to
 * look again, since notifications sent in the gap are gone. It connects at
 * application bootstrap and closes after the workers have drained.
 */
@Injectable()
export class NotificationListener implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Cyclone');
  private readonly subscribers = new Map<Channel, Set<Listener>>([
    [WAKE_CHANNEL, new Set()],
    [RUN_FINISHED_CHANNEL, new Set()],
    [OUTBOX_CHANNEL, new Set()],
    [TIMER_CHANNEL, new Set()],
    [IDLE_CHANNEL, new Set()],
  ]);
  private readonly reconnectSubscribers = new Set<() => void>();
  private client?: pg.Client;
  private stopped = true;
  private reconnectDelay = RECONNECT_MIN_MS;
  private readonly reconnectMaxMs: number;
  /** Attempts since the connection was lost, to log the loss once rather than every retry. */
  private failedAttempts = 0;
  private reconnectTimer?: NodeJS.Timeout;
  private connected = false;
  /** A wake-up being sent on this connection; stop lets it finish. */
  private publishing?: Promise<unknown>;

  constructor(
    private readonly database: CycloneDatabase,
    stats: CycloneStats,
    @Inject(CYCLONE_OPTIONS) private readonly options: ResolvedOptions,
  ) {
    stats.listenerConnected = () => this.connected;
    this.reconnectMaxMs = Math.max(options.pollIntervalMs[1], RECONNECT_MIN_MS);
  }

  onApplicationBootstrap(): Promise<void> {
    return this.start();
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.stop();
  }

  get isConnected(): boolean {
    return this.connected;
  }

  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    this.connected = false;
    // Its failure, if any, is its caller's to report.
    await this.publishing?.catch(() => undefined);
    await client?.end().catch((err: Error) => this.logger.debug(`LISTEN connection close: ${err.message}`));
  }

  /** Calls `fn` with each payload on `channel`; returns the unsubscribe function. */
  on(channel: Channel, fn: Listener): () => void {
    const set = this.subscribers.get(channel)!;
    set.add(fn);
    return () => set.delete(fn);
  }

  /** Calls `fn` after each reconnect, when notifications may have been missed. */
  onReconnect(fn: () => void): () => void {
    this.reconnectSubscribers.add(fn);
    return () => this.reconnectSubscribers.delete(fn);
  }

  private async connect(): Promise<void> {
    const statementTimeoutMs = this.options.statementTimeoutMs;
    const client = new pg.Client({
      ...this.database.clientConfig(),
      application_name: 'cyclone-listener',
      // An idle LISTEN connection would otherwise never notice a silent network partition.
      keepAlive: true,
      // Cyclone's own connection, also beside a DataSource of the app's: no statement of it may hang.
      ...(statementTimeoutMs > 0 ? { statement_timeout: statementTimeoutMs, connectionTimeoutMillis: statementTimeoutMs } : {}),
    });
    // This connection sends only this app's own wake-ups (publishWakes), which
    // were delivered in process already: their echo is skipped.
    let ownPid: number | undefined;
    client.on('notification', (msg) => {
      if (msg.processId !== ownPid) this.deliver(msg.channel, msg.payload ?? '');
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    this.client = client;
    try {
      await client.connect();
      // The outbox's and the timers' wake-ups are for clients with broker dispatch on (which do not poll).
      await client.query(
        `LISTEN ${WAKE_CHANNEL}; LISTEN ${RUN_FINISHED_CHANNEL}; LISTEN ${IDLE_CHANNEL}` +
          (this.options.dispatch ? `; LISTEN ${OUTBOX_CHANNEL}; LISTEN ${TIMER_CHANNEL}` : ''),
      );
      ownPid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    } catch (err) {
      this.lost(client, err as Error);
      return;
    }
    if (this.client !== client) return;
    const wasReconnect = this.failedAttempts > 0;
    this.connected = true;
    this.reconnectDelay = RECONNECT_MIN_MS;
    this.failedAttempts = 0;
    if (wasReconnect) {
      this.logger.log('LISTEN connection restored');
      for (const fn of this.reconnectSubscribers) fn();
    }
  }

  private lost(client: pg.Client, err?: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.connected = false;
    client.removeAllListeners('end');
    client.end().catch((e: Error) => this.logger.debug(`LISTEN connection close: ${e.message}`));
    if (this.stopped) return;
    const line = `LISTEN connection lost${err ? `: ${err.message}` : ''}; polling covers the gap, retrying in ${this.reconnectDelay} ms`;
    // The first failure is worth a warning; the retries of an outage are not, each one.
    if (this.failedAttempts++ === 0) this.logger.warn(line);
    else this.logger.debug(line);
    this.reconnectTimer = setTimeout(() => void this.connect(), this.reconnectDelay);
    this.reconnectDelay = Math.min(this.reconnectDelay * 2, this.reconnectMaxMs);
  }

  /**
   * Wakes `queues` on every replica, sent over this connection so that the
   * echo to this app, which woke its own workers in process, is told apart
   * by its sender and skipped. False when the connection is down; the caller
   * then sends the wake-ups another way.
   */
  async publishWakes(queues: string[]): Promise<boolean> {
    const client = this.connected ? this.client : undefined;
    if (!client) return false;
    const sent = execute(client, WAKE_QUEUES, [queues]);
    this.publishing = sent;
    try {
      await sent;
    } finally {
      if (this.publishing === sent) this.publishing = undefined;
    }
    return true;
  }

  /**
   * Hands a notification to this app's subscribers as if it had come from
   * the server; for this app's own wake-ups, which need no round trip.
   */
  deliver(channel: string, payload: string): void {
    for (const fn of this.subscribers.get(channel as Channel) ?? []) fn(payload);
  }
}
