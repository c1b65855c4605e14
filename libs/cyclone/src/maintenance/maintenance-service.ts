import type { Loop } from '../common/loop.js';

/** A background service of every client: recovery, timers, retention. It owns its loop. */
export interface MaintenanceService {
  readonly loop: Loop;
  /** Whether its first pass runs as soon as the client starts, rather than one interval later. */
  readonly runsAtStartup: boolean;
}
