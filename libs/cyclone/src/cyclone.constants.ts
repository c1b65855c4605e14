/** Injection token of the resolved module options. */
export const CYCLONE_OPTIONS = Symbol('CYCLONE_OPTIONS');

/** Metadata key set on a `@Step` method. */
export const STEP_METADATA = 'cyclone:step';
/** Metadata key set on a class with at least one `@Step` method, so discovery can skip the rest. */
export const STEP_HOST_METADATA = 'cyclone:step-host';
/** Metadata key set on a `@Workflow` method. */
export const WORKFLOW_METADATA = 'cyclone:workflow';
/** Metadata key set on a class with at least one `@Workflow` method. */
export const WORKFLOW_HOST_METADATA = 'cyclone:workflow-host';
/** Metadata key set on an `@OnStepEvent` method: the events it listens to. */
export const STEP_EVENT_METADATA = 'cyclone:step-event';
/** Metadata key set on a class with at least one `@OnStepEvent` method. */
export const STEP_EVENT_HOST_METADATA = 'cyclone:step-event-host';

export const DEFAULT_QUEUE = 'default';
export const DEFAULT_WORKERS = 10;
export const DEFAULT_MAX_ATTEMPTS = 5;
export const DEFAULT_LEASE_TTL_MS = 30_000;
export const DEFAULT_POLL_INTERVAL_MS: readonly [number, number] = [100, 1_000];
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;
export const DEFAULT_RETENTION_MS = 7 * 24 * 3_600_000;
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;
/** Startup connection attempts and the wait between them: @nestjs/typeorm's retryAttempts and retryDelay. */
export const DEFAULT_CONNECT_ATTEMPTS = 9;
export const DEFAULT_CONNECT_DELAY_MS = 3_000;
/** statement_timeout of Cyclone's connections: River's timeout for its maintenance queries. */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;
/** How often terminal runs past their retention are deleted, and how many a pass. */
export const RETENTION_INTERVAL_MS = 60_000;
export const RETENTION_BATCH = 1_000;
/** Monthly partitions kept ready ahead of the current month, and how often they are maintained. */
export const DEFAULT_PARTITION_MONTHS_AHEAD = 3;
export const PARTITION_INTERVAL_MS = 6 * 3_600_000;
/** How often the `cyclone:metrics` loop samples the queues by default: a usual scrape interval. */
export const DEFAULT_METRICS_SAMPLE_INTERVAL_MS = 15_000;

/**
 * Schedules: a tick more than this old is missed (catchUp 'none' skips it),
 * and the schedule loop looks again at least this often.
 */
export const SCHEDULE_ON_TIME_MS = 10_000;
export const SCHEDULE_MAX_WAIT_MS = 5_000;

/**
 * How often a client refreshes its row in cyclone_clients, and how long a
 * row that is not refreshed stays: a client gone without a word (killed, cut
 * off from the database) drops out after three missed refreshes.
 */
export const CLIENT_REFRESH_INTERVAL_MS = 10_000;
export const CLIENT_STALE_AFTER_MS = 3 * CLIENT_REFRESH_INTERVAL_MS;

/** How often queued steps' flow keys are brought in line with the app's limits (FlowKeySweeper). */
export const FLOW_KEY_INTERVAL_MS = 60_000;

export const MIN_PRIORITY = -1000;
export const MAX_PRIORITY = 1000;
/** The largest attempt count we accept; far above any sane retry policy. */
export const MAX_ATTEMPTS_LIMIT = 1000;

/** The most nodes a code workflow's run may record, unless its `maxNodes` says otherwise. */
export const DEFAULT_MAX_NODES = 10_000;
/** The largest `maxNodes` we accept: each pass loads every node of its run. */
export const MAX_NODES_LIMIT = 1_000_000;

/** Injection token of the SchedulerRegistry the loops register in: the app's, or a private one. */
export const CYCLONE_SCHEDULER = Symbol('CYCLONE_SCHEDULER');
