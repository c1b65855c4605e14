import { statement } from '../database/statement.js';

/**
 * Records this app's schedules, keeping what is known of those seen before.
 * A schedule whose expression or time zone changed starts afresh: ticks of
 * the new expression before now are owed to no one.
 */
export const REGISTER_SCHEDULES = statement<
  [names: string[], kinds: string[], crons: string[], timezones: string[], nextTicks: (Date | null)[]]
>(
  'cyclone_register_schedules',
  /* sql */ `
INSERT INTO cyclone_schedules AS s (name, kind, cron, timezone, next_tick_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])
ON CONFLICT (name) DO UPDATE
   SET kind = EXCLUDED.kind, cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, next_tick_at = EXCLUDED.next_tick_at,
       since = CASE WHEN (s.cron, s.timezone) IS DISTINCT FROM (EXCLUDED.cron, EXCLUDED.timezone) THEN now() ELSE s.since END,
       updated_at = now()`,
);

export interface ScheduleStateRow {
  name: string;
  since: Date;
  last_tick_at: Date | null;
  /** The database clock, which decides when a tick is due. */
  now: Date;
}

/** The durable state of the named schedules, with the database's clock. */
export const SCHEDULE_STATE = statement<[names: string[]], ScheduleStateRow>(
  'cyclone_schedule_state',
  /* sql */ `
SELECT c.now, s.name, s.since, s.last_tick_at
  FROM (SELECT now() AS now) c LEFT JOIN cyclone_schedules s ON s.name = ANY ($1::text[])`,
);

/**
 * Claims a tick of a schedule: moves last_tick_at up to it, if no one has
 * fired it or a later one, and only once it is due on the database clock.
 * The run of the tick is enqueued in the same transaction, so a tick that
 * returns a row here gets exactly one run, and one that does not gets none
 * from this client. Replicas firing together wait on the row's lock, and the
 * later one finds the tick taken.
 */
export const CLAIM_SCHEDULE_TICK = statement<[name: string, tick: Date, runId: string, nextTick: Date | null], { name: string }>(
  'cyclone_claim_schedule_tick',
  /* sql */ `
UPDATE cyclone_schedules
   SET last_tick_at = $2, last_run_id = $3, next_tick_at = $4, updated_at = now()
 WHERE name = $1 AND (last_tick_at IS NULL OR last_tick_at < $2) AND $2 <= now()
RETURNING name`,
);
