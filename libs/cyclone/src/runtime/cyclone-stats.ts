import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Loop } from '../common/loop.js';
import { EngineEvents } from './engine-events.js';
import type { DispatchStats } from '../dispatch/dispatch-stats.js';

/** How long ago a loop last finished a tick, and how that tick ended. */
export interface LoopState {
  name: string;
  /** When its last tick finished; null before the first. */
  lastTickAt: Date | null;
  /** Before its first tick ends, a loop's age counts from its start; null when it never started. */
  lastTickAgeMs: number | null;
  lastError: string | null;
}

/** One queue's steps across the cluster, as the `cyclone:metrics` loop last read them. */
export interface QueueSample {
  queue: string;
  /** Available and due now. */
  available: number;
  /** Available, due later (a delay, a backoff). */
  scheduled: number;
  running: number;
  /** How long the oldest due step has waited; 0 when none waits. */
  oldestAvailableMs: number;
  /** Stopped with pauseQueue. */
  paused: boolean;
}

/** What the `cyclone:metrics` loop last read from the database: the whole cluster's, not only this client's. */
export interface ClusterSample {
  queues: QueueSample[];
  /** Running steps whose lease expired past two poll ticks ago and that no sweep reclaimed. */
  strandedLeases: number;
  /** The outbox's due rows and the oldest one's age, with broker dispatch on. */
  outbox?: { rows: number; oldestSeconds: number };
  sampledAt: Date;
}

/**
 * What this client is and what it has seen: its identity (the lease owner
 * of the steps it claims), its counters, its loops and how many steps it is
 * running. Written by the workers and loops, read by health and metrics;
 * a reader needs nothing else of the engine.
 */
export class CycloneStats {
  /** This client's identity; every lease it takes is in this name. */
  readonly clientId = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  heartbeatFailures = 0;
  leasesLost = 0;
  claimFailures = 0;
  lastClaimError: string | null = null;
  /** The queues this client's workers serve and their slots; empty for an enqueue-only client. */
  servedQueues: ReadonlyMap<string, number> = new Map();
  /** The code workflows this client's workers run, and their versions. */
  workflowVersions: ReadonlyMap<string, number> = new Map();
  /** Steps this client's workers hold right now. */
  running: () => number = () => 0;
  listenerConnected: () => boolean = () => false;
  /** Monthly partitions old enough to drop that a live run keeps (see PartitionMaintainer). */
  keptPartitions: string[] = [];
  /** What the engine does, as it happens: metrics and step event listeners observe it. */
  readonly events = new EngineEvents();
  /**
   * How often the `cyclone:metrics` loop samples the cluster's queues; null,
   * and the loop does not run, until a metrics module asks for samples.
   */
  sampleIntervalMs: number | null = null;
  /** The last sample; null before the first. */
  clusterSample: ClusterSample | null = null;
  /**
   * How long past its expiry a lease may stay before a sweep should have
   * reclaimed it: two sweep intervals, plus the grace the sweep leaves the
   * reclaimer with broker dispatch on (set by the RecoverySweeper).
   */
  strandedAfterMs: number;
  /** Broker dispatch's counters; null when dispatch is off. */
  dispatch: DispatchStats | null = null;
  private readonly loops = new Map<string, Loop>();

  constructor(
    /** The poll interval [min, max] in ms: a loop that has not ticked for several of these is stuck. */
    readonly pollIntervalMs: readonly [number, number],
  ) {
    this.strandedAfterMs = 2 * pollIntervalMs[1];
  }

  /** Makes a loop visible to health and metrics, and its passes to the engine's observers. */
  track(loop: Loop): void {
    this.loops.set(loop.name, loop);
    loop.onPassEnded = (pass) => this.events.passEnded({ loop: loop.name, ...pass });
  }

  /** Asks for the cluster's queues to be sampled every `intervalMs` (before the app bootstraps). */
  requestSamples(intervalMs: number): void {
    this.sampleIntervalMs = Math.min(this.sampleIntervalMs ?? intervalMs, intervalMs);
  }

  /** Whether this client runs workers (it is not enqueue-only, and it is the module's first import). */
  get runsWorkers(): boolean {
    return this.servedQueues.size > 0;
  }

  loopStates(): LoopState[] {
    return [...this.loops.values()].filter((loop) => loop.startedAt !== null).map((loop) => ({
      name: loop.name,
      lastTickAt: loop.lastTickAt,
      lastTickAgeMs: Date.now() - (loop.lastTickAt ?? loop.startedAt!).getTime(),
      lastError: loop.lastError,
    }));
  }
}
