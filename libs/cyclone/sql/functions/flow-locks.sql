-- Flow control's locks and rate windows (see claim-flow.sql).
--
-- A claim of a limited kind, or on a queue with a cluster-wide cap, first
-- takes a transaction advisory lock on that kind (and on that queue), then
-- counts what is running in a statement of its own. Claims of one kind thus
-- take turns cluster-wide, and each counts with a snapshot taken after the
-- claim before it committed: two replicas claiming at the same instant can
-- never both see the same free room. Nothing else takes these locks; a claim
-- takes its queue's lock before its kind's, so claims never deadlock with
-- each other. The two-key form keeps them apart from the application's own
-- advisory locks and from the one-key locks of migrations and partitions.

-- Locks one flow scope ('queue:<name>' or 'kind:<name>') until the transaction ends.
CREATE OR REPLACE FUNCTION cyclone_lock_flow(p_scope text) RETURNS void
LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(748201, hashtext(p_scope));
$$;

-- Rate windows. Each start of a rate-limited step is counted in a bucket of
-- its scope ('rate:<kind>' or 'rate:<kind>:<key>'), 20 buckets a window. A
-- claim may start a step only while the buckets that overlap the window
-- ending now, partly covered ones included, hold fewer than the limit: a
-- start is compared with every start less than a window before it, so no
-- window of that length, wherever it falls, ever holds more than the limit
-- (the partly covered bucket makes it err on the side of fewer starts, by at
-- most a twentieth of a window). One row a bucket rather than one a start:
-- a claim of many steps writes one row a scope.

-- A bucket is greatest(per / 20, 1) ms wide; bucket n covers
-- [n * width, (n + 1) * width) in epoch milliseconds.

-- Starts counted in the scope's buckets that overlap the last window.
CREATE OR REPLACE FUNCTION cyclone_rate_used(p_scope text, p_per_ms bigint) RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT coalesce(sum(starts), 0)::integer FROM cyclone_rate_buckets
   WHERE scope = p_scope
     AND bucket >= floor((extract(epoch FROM now()) * 1000 - p_per_ms) / greatest(p_per_ms / 20, 1))::bigint;
$$;

-- Counts one start for each element of p_scopes (a scope may repeat) in its
-- current bucket. Buckets are deleted once they can no longer overlap a
-- window (expires_at), by the retention sweep.
CREATE OR REPLACE FUNCTION cyclone_rate_record(p_scopes text[], p_per_ms bigint) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO cyclone_rate_buckets AS b (scope, bucket, starts, expires_at)
  SELECT scope, floor(extract(epoch FROM now()) * 1000 / greatest(p_per_ms / 20, 1))::bigint, count(*)::integer,
         now() + (greatest(p_per_ms / 20, 1) + p_per_ms) * interval '1 millisecond'
    FROM unnest(p_scopes) AS scope
   GROUP BY scope
  ON CONFLICT (scope, bucket) DO UPDATE SET starts = b.starts + EXCLUDED.starts;
$$;
