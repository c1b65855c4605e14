/**
 * The part of a node-redis client (the `redis` package, an optional peer)
 * that dispatch uses. Declared here rather than imported, so that the
 * package's declarations compile for apps that do not install `redis`.
 */
export interface StreamMessage {
  id: string;
  message: Record<string, string>;
}

export interface PendingEntry {
  id: string;
  consumer: string;
  millisecondsSinceLastDelivery: number;
  deliveriesCounter: number;
}

export interface RedisCommands {
  readonly isReady: boolean;
  connect(): Promise<unknown>;
  destroy(): void;
  on(event: 'error' | 'ready' | 'end', listener: (...args: unknown[]) => void): unknown;
  duplicate(options?: Record<string, unknown>): RedisCommands;
  get(key: string): Promise<string | null>;
  set(key: string, value: string): Promise<unknown>;
  ping(): Promise<string>;
  xAdd(key: string, id: string, message: Record<string, string>): Promise<string>;
  xGroupCreate(key: string, group: string, id: string, options?: { MKSTREAM?: boolean }): Promise<unknown>;
  xReadGroup(
    group: string,
    consumer: string,
    streams: { key: string; id: string }[],
    options?: { COUNT?: number; BLOCK?: number },
  ): Promise<{ name: string; messages: StreamMessage[] }[] | null>;
  xAck(key: string, group: string, ids: string[]): Promise<number>;
  xDel(key: string, ids: string[]): Promise<number>;
  xPendingRange(
    key: string,
    group: string,
    start: string,
    end: string,
    count: number,
    options?: { IDLE?: number },
  ): Promise<PendingEntry[]>;
  xClaim(key: string, group: string, consumer: string, minIdle: number, ids: string[]): Promise<(StreamMessage | null)[]>;
  xClaimJustId(key: string, group: string, consumer: string, minIdle: number, ids: string[]): Promise<string[]>;
  xLen(key: string): Promise<number>;
}
