import { Logger } from '@nestjs/common';
import { requireOptional } from '../common/optional-peer.js';
import { errorMessage } from '../common/error-message.js';
import { RedisUnavailableError } from '../errors/redis-unavailable.error.js';
import type { ResolvedDispatch } from '../options/resolved-options.js';
import type { RedisCommands } from './redis-commands.js';

/** Reconnect backoff while Redis is away: from this, doubling, to the maximum. */
const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 2_000;

/** host:port of a Redis URL, never its password; never throws. */
export function describeRedisUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname || 'localhost'}:${parsed.port || '6379'}${parsed.pathname.length > 1 ? parsed.pathname : ''}`;
  } catch {
    return 'the configured Redis URL (it is not a URL of the form redis://host:6379)';
  }
}

/**
 * This client's connections to Redis: one for commands (publishing,
 * acknowledgements, reclaims), and one more for each blocking reader, made
 * by `reader()`. Commands fail at once while Redis is away (no offline
 * queue: the outbox and the database are the queue), and every connection
 * reconnects by itself with backoff. `up` says whether the command
 * connection is ready; those who must act on a change subscribe.
 */
export class RedisLink {
  private readonly logger = new Logger('Cyclone');
  readonly description: string;
  private command?: RedisCommands;
  private readonly readers = new Set<RedisCommands>();
  private readonly listeners = new Set<(up: boolean) => void>();
  private wasUp = false;
  private closed = false;

  constructor(private readonly options: ResolvedDispatch) {
    this.description = 'url' in options.redis ? describeRedisUrl(options.redis.url) : "the app's Redis client";
  }

  get up(): boolean {
    return this.command?.isReady === true;
  }

  /** The command connection; a command sent while Redis is away rejects at once. */
  get commands(): RedisCommands {
    if (!this.command) throw new RedisUnavailableError(`Redis at ${this.description} is not connected yet.`);
    return this.command;
  }

  onChange(listener: (up: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Connects the command connection. Redis away: a RedisUnavailableError
   * naming its host, and the connection goes on trying in the background
   * (the caller decides whether the app may start without it).
   */
  async connect(): Promise<void> {
    this.command = this.create();
    this.command.on('ready', () => this.changed(true));
    this.command.on('end', () => this.changed(false));
    const command = this.command;
    // connect() waits through every retry; the first failure is the answer at startup.
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      command.on('error', (err) => {
        if (settled) return;
        settled = true;
        reject(new RedisUnavailableError(`Cannot reach Redis at ${this.description}: ${errorMessage(err)}.`, err));
      });
      command.connect().then(
        () => {
          settled = true;
          resolve();
        },
        (err: unknown) => {
          if (settled) return;
          settled = true;
          reject(new RedisUnavailableError(`Cannot reach Redis at ${this.description}: ${errorMessage(err)}.`, err));
        },
      );
    });
  }

  /** A connection of its own for blocking reads (XREADGROUP … BLOCK), connected in the background. */
  reader(): RedisCommands {
    const reader = this.create();
    this.readers.add(reader);
    reader.connect().catch(() => undefined);
    return reader;
  }

  /** Closes a reader made by `reader()`, aborting a blocking read in flight. */
  closeReader(reader: RedisCommands): void {
    this.readers.delete(reader);
    destroy(reader);
  }

  close(): void {
    this.closed = true;
    for (const reader of this.readers) destroy(reader);
    this.readers.clear();
    if (this.command) destroy(this.command);
  }

  private create(): RedisCommands {
    const socket = {
      reconnectStrategy: (retries: number) => Math.min(RECONNECT_MIN_MS * 2 ** retries, RECONNECT_MAX_MS),
      connectTimeout: 5_000,
    };
    let client: RedisCommands;
    if ('client' in this.options.redis) {
      client = (this.options.redis.client as unknown as RedisCommands).duplicate({ socket, disableOfflineQueue: true });
    } else {
      const { createClient } = requireOptional<{ createClient(options: object): RedisCommands }>('redis', 'The dispatch option');
      client = createClient({ url: this.options.redis.url, socket, disableOfflineQueue: true });
    }
    // Every error also surfaces where the command was sent, or as the link going down: logged there, once.
    client.on('error', () => undefined);
    return client;
  }

  private changed(up: boolean): void {
    if (this.closed || up === this.wasUp) return;
    this.wasUp = up;
    if (up) this.logger.log(`Broker dispatch: Redis at ${this.description} is reachable`);
    else this.logger.warn(`Broker dispatch: lost Redis at ${this.description}; reconnecting`);
    for (const listener of this.listeners) listener(up);
  }
}

function destroy(client: RedisCommands): void {
  try {
    client.destroy();
  } catch {
    // Already closed.
  }
}
