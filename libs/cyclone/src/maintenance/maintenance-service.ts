import type { Loop } from '../common/loop.js';

/** A background service of every client: recovery, timers, retention, metric samples. It owns its loop. */
export interface MaintenanceService {
  readonly loop: Loop;
  /** Whether its first pass runs as soon as the client starts, rather than one interval later. */
  readonly runsAtStartup: boolean;
  /** Whether it runs in this app; a service without it always does. */
  readonly enabled?: boolean;
}
