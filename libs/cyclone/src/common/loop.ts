import { Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';

/**
 * A client's loops, by the names the health indicator, the metric
 * `cyclone_loop_last_tick_age_seconds` and the SchedulerRegistry know them
 * by. `cyclone:claim` is each queue's claim, which the poll loop and
 * wake-ups start; the others are Loops.
 */
export const LOOP_NAMES = [
  'cyclone:claim',
  'cyclone:poll',
  'cyclone:recovery',
  'cyclone:timers',
  'cyclone:schedules',
  'cyclone:retention',
  'cyclone:partitions',
  'cyclone:flow-keys',
  'cyclone:metrics',
  'cyclone:clients',
  'cyclone:outbox',
  'cyclone:dispatch',
] as const;
export type LoopName = (typeof LOOP_NAMES)[number];

/**
 * A background task that never overlaps itself: the next tick is scheduled
 * only after the current call settles. The pending timeout is registered in
 * the SchedulerRegistry under the loop's name, so the app can see it.
 */
export class Loop {
  private readonly logger = new Logger('Cyclone');
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = true;
  /** A trigger arrived during a tick: the next tick runs at once. */
  private again = false;
  /** When the last tick finished, for the health indicator. */
  lastTickAt: Date | null = null;
  lastError: string | null = null;
  startedAt: Date | null = null;
  /** Told of every pass once it is over: when it began (`performance.now()`), and its error if it failed. */
  onPassEnded?: (pass: { startedAt: number; error?: string }) => void;

  constructor(
    readonly name: Exclude<LoopName, 'cyclone:claim'>,
    private readonly delayMs: () => number,
    private readonly task: () => Promise<void>,
    private readonly registry: SchedulerRegistry,
    /** Failures someone else logs already (a database outage): the loop records them without a warning each tick. */
    private readonly loggedElsewhere: (err: unknown) => boolean = () => false,
  ) {}

  start(firstDelayMs = this.delayMs()): void {
    this.stopped = false;
    this.startedAt = new Date();
    this.schedule(firstDelayMs);
  }

  /** Runs a tick now, or right after the one running; used to react to events sooner. */
  trigger(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    void this.tick();
  }

  /** Stops scheduling and waits for a running tick to finish. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.unregister();
    await this.running;
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), delay);
    this.unregister();
    this.registry.addTimeout(this.name, this.timer);
  }

  private async tick(): Promise<void> {
    const startedAt = performance.now();
    this.running = this.task()
      .then(() => {
        this.lastError = null;
      })
      .catch((err: Error) => {
        this.lastError = err.message;
        if (!this.loggedElsewhere(err)) this.logger.warn(`${this.name} failed: ${err.message}`);
      })
      .finally(() => {
        this.lastTickAt = new Date();
        this.onPassEnded?.({ startedAt, ...(this.lastError === null ? {} : { error: this.lastError }) });
      });
    await this.running;
    this.running = undefined;
    const again = this.again;
    this.again = false;
    this.schedule(again ? 0 : this.delayMs());
  }

  private unregister(): void {
    if (this.registry.doesExist('timeout', this.name)) this.registry.deleteTimeout(this.name);
  }
}
