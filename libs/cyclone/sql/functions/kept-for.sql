-- How long a run that has just finished is kept (its delete_after, from
-- now): its retention. A run kept for no time (retention 0) that completed
-- is not kept, unless a caller waits for its result: then for a minute, to
-- be read. One that failed or was cancelled is kept for the default
-- retention (7 days, DEFAULT_RETENTION_MS), so that an operator sees it.
-- (A standalone job of retention 0 nobody waits for is deleted as it
-- completes, by complete-steps.sql, and never gets here.)
CREATE OR REPLACE FUNCTION cyclone_kept_for(p_retention interval, p_state text, p_waited boolean)
RETURNS interval
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
           WHEN p_retention > interval '0' THEN p_retention
           WHEN p_state <> 'completed' THEN interval '7 days'
           WHEN p_waited THEN interval '1 minute'
           ELSE interval '0'
         END
$$;
