-- Where a claim starts reading. The claim index holds, in each priority band
-- of a queue, its available steps in claim order (due time, then age); a
-- step that is claimed leaves its entry behind, dead, until the vacuum
-- removes it. Normally the first scan that meets a dead entry marks it, and
-- later ones skip it without reading the heap. While anything holds back the
-- database's xmin (a long transaction, a replica's feedback, a slow backup)
-- no entry can be marked, and a scan from the start of a band reads the heap
-- for every step claimed since: 633 buffers and 2.5 ms for a claim of 10
-- steps once 20,000 had been claimed under a held snapshot, against 52 and
-- 0.6 ms starting from a floor (PostgreSQL 15, EXPLAIN (ANALYZE, BUFFERS));
-- at 1,000 jobs a second that walk grows by 1,000 entries every second.
--
-- So a client remembers, for each band it claims from, a floor: a time
-- below which no step of the band that it could take is available (its
-- claims move it on, claim-steps.sql; src/worker/claim-floors.ts). Its
-- claims start each band there. A floor can be passed by a step that became
-- available below it afterwards: an enqueue that committed more than the
-- floor's second of slack after its transaction began, a step handed back
-- or reclaimed (they keep their place), a claim that was rolled back. The
-- client looks below its floors on each poll tick (cyclone_claim_floors),
-- so such a step waits at most for that; every other path is unchanged.

-- The floor a read of a band leaves behind, from the due time of the first
-- step it took or, when it emptied the band, its statement's time: a second
-- lower, for enqueues that commit after a later read began (their steps are
-- due from their transaction's start). Both claims and enqueues that start
-- their jobs move floors with it.
CREATE OR REPLACE FUNCTION cyclone_floor_below(p_at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
  SELECT p_at - interval '1 second'
$$;

-- The bands to read, highest first, each with where its scan starts: the
-- caller's bands (p_bands, highest first, with p_floors) from their floors,
-- and every other band from its start, found by probing the gaps between
-- the caller's bands (a band the caller does not know has no floor of its
-- own to skip its dead entries; a band that nobody claims from has none).
-- Only bands at or above p_min_priority. Without bands: every band from its
-- start, as a claim read before floors.
CREATE OR REPLACE FUNCTION cyclone_claim_bands(p_queue text, p_low uuid, p_min_priority integer, p_bands smallint[],
                                               p_floors timestamptz[])
RETURNS TABLE (band smallint, floor timestamptz)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_known integer := coalesce(cardinality(p_bands), 0);
  v_above integer := 32768;
  v_below integer;
  v_found smallint;
BEGIN
  FOR i IN 1 .. v_known + 1 LOOP
    v_below := greatest(CASE WHEN i <= v_known THEN p_bands[i] ELSE -32769 END, p_min_priority - 1);
    LOOP
      v_found := (SELECT c.priority FROM cyclone_steps c
                   WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_queue
                     AND c.priority < v_above AND c.priority > v_below AND c.run_id >= p_low
                   ORDER BY c.priority DESC LIMIT 1);
      EXIT WHEN v_found IS NULL;
      band := v_found;
      floor := '-infinity';
      RETURN NEXT;
      v_above := v_found;
    END LOOP;
    EXIT WHEN i > v_known OR p_bands[i] < p_min_priority;
    band := p_bands[i];
    floor := p_floors[i];
    RETURN NEXT;
    v_above := p_bands[i];
  END LOOP;
END $$;

-- The look below a client's floors, on its poll tick: for each band, the
-- due time of its oldest available step below the floor (of the kinds the
-- client runs), or the floor itself when there is none. It reads what a
-- claim from the band's start would have read; once a poll tick, not on
-- every claim.
CREATE OR REPLACE FUNCTION cyclone_claim_floors(p_queue text, p_kinds text[], p_bands smallint[],
                                                p_floors timestamptz[])
RETURNS TABLE (band smallint, floor timestamptz)
LANGUAGE sql STABLE
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
AS $$
  SELECT b.band,
         coalesce((SELECT c.scheduled_at FROM cyclone_steps c
                    WHERE c.state = 'available' AND c.flow_key IS NULL AND c.queue = p_queue AND c.priority = b.band
                      AND c.scheduled_at < b.floor AND c.kind = ANY (p_kinds)
                      AND c.run_id >= (SELECT f.low FROM cyclone_claim_floor f)
                    ORDER BY c.scheduled_at LIMIT 1), b.floor)
    FROM unnest(p_bands, p_floors) AS b(band, floor)
$$;
