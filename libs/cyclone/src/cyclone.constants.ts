/** Injection token of the resolved module options. */
export const CYCLONE_OPTIONS = Symbol('CYCLONE_OPTIONS');

/** Metadata key set on a `@Step` method. */
export const STEP_METADATA = 'cyclone:step';
/** Metadata key set on a class with at least one `@Step` method, so discovery can skip the rest. */
export const STEP_HOST_METADATA = 'cyclone:step-host';

export const DEFAULT_QUEUE = 'default';
export const DEFAULT_WORKERS = 10;
export const DEFAULT_MAX_ATTEMPTS = 5;
export const DEFAULT_LEASE_TTL_MS = 30_000;
export const DEFAULT_POLL_INTERVAL_MS: readonly [number, number] = [100, 1_000];
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;
export const DEFAULT_RETENTION_MS = 7 * 24 * 3_600_000;
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;
/** How often terminal runs past their retention are deleted, and how many a pass. */
export const RETENTION_INTERVAL_MS = 60_000;
export const RETENTION_BATCH = 1_000;
/** Monthly partitions kept ready ahead of the current month, and how often they are maintained. */
export const DEFAULT_PARTITION_MONTHS_AHEAD = 3;
export const PARTITION_INTERVAL_MS = 6 * 3_600_000;

/**
 * Schedules: a tick more than this old is missed (catchUp 'none' skips it),
 * and the schedule loop looks again at least this often.
 */
export const SCHEDULE_ON_TIME_MS = 10_000;
export const SCHEDULE_MAX_WAIT_MS = 5_000;

/** How often queued steps' flow keys are brought in line with the app's limits (FlowKeySweeper). */
export const FLOW_KEY_INTERVAL_MS = 60_000;

export const MIN_PRIORITY = -1000;
export const MAX_PRIORITY = 1000;
/** The largest attempt count we accept; far above any sane retry policy. */
export const MAX_ATTEMPTS_LIMIT = 1000;

/** Injection token of the SchedulerRegistry the loops register in: the app's, or a private one. */
export const CYCLONE_SCHEDULER = Symbol('CYCLONE_SCHEDULER');
