-- cyclone_enqueue(kind, input, options): a standalone job enqueued from SQL,
-- by a trigger, psql or a program in another language, with what the
-- client's enqueue checks and does. The kind must be one a client recorded
-- at startup (cyclone_step_kinds, with its defaults: queue, priority,
-- attempts, timeout, retention, maxReclaims, backoff, limits, payload
-- limit). The options are enqueue's, by the same names. A refusal raises an
-- error that names the option at fault and inserts nothing; the job is
-- written by cyclone_insert_jobs (insert-jobs.sql), as the client's are, and
-- its queue is woken when the transaction commits. Returns the run id.
--
-- Refusals, by SQLSTATE: undefined_object, a kind no client registered;
-- feature_not_supported, a kind whose limits' key is a JavaScript function
-- of the input (only the client can call it); invalid_parameter_value, an
-- unknown option or a bad value; program_limit_exceeded, an input over the
-- kind's payload limit or nested too deep; unique_violation, a unique key an
-- unfinished run holds (onConflict 'error', the default; the holder's run id
-- is in the error's detail). Raising aborts the caller's transaction, as any
-- error does: with onConflict 'keep' a duplicate returns the holder instead.
CREATE OR REPLACE FUNCTION cyclone_enqueue(kind text, input jsonb, options jsonb DEFAULT '{}')
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
  v_kind        cyclone_step_kinds%ROWTYPE;
  v_options     jsonb := coalesce(options, '{}');
  v_input       jsonb := coalesce(input, 'null');
  v_text        text;
  v_option      text;
  v_unique      jsonb;
  v_key         text;
  v_on_conflict text := 'error';
  v_debounce_ms bigint;
  v_process_at  timestamptz;
  v_process_in  bigint;
  v_id          uuid := cyclone_uuid7();
  v_inserted    uuid;
  v_holder      uuid;
  v_outcome     text;
BEGIN
  SELECT * INTO v_kind FROM cyclone_step_kinds k WHERE k.kind = cyclone_enqueue.kind;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'undefined_object',
      MESSAGE = format('cyclone_enqueue: no client has registered step kind %s.', coalesce(quote_literal(cyclone_enqueue.kind), 'NULL')),
      HINT = 'A client records the kinds of its @Step handlers when it starts: start one that has this kind, or check the name.';
  END IF;
  IF v_kind.limit_key_option IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
      MESSAGE = format('cyclone_enqueue cannot enqueue step kind %L: its option %s is a JavaScript function of the input, which only the client can call.',
                       cyclone_enqueue.kind, v_kind.limit_key_option),
      HINT = 'Enqueue this kind with the client (enqueue, enqueueTx).';
  END IF;

  IF jsonb_typeof(v_options) <> 'object' THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = format('cyclone_enqueue: the options must be a JSON object such as {"queue": "bulk", "processIn": "5m"}; got %s.',
                       left(v_options::text, 100));
  END IF;
  FOR v_option IN SELECT jsonb_object_keys(v_options) LOOP
    IF NOT v_option = ANY (ARRAY['queue', 'priority', 'processIn', 'processAt', 'timeout', 'maxAttempts', 'retention',
                                  'unique', 'maxReclaims']) THEN
      RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
        MESSAGE = format('cyclone_enqueue: unknown option "%s". Known options: queue, priority, processIn, processAt, timeout, maxAttempts, retention, unique, maxReclaims.',
                         left(v_option, 100));
    END IF;
  END LOOP;

  -- Each option given replaces the kind's default.
  v_kind.queue := coalesce(cyclone_option_name(v_options -> 'queue', 'queue'), v_kind.queue);
  v_kind.priority := coalesce(cyclone_option_integer(v_options -> 'priority', 'priority', -1000, 1000), v_kind.priority);
  v_kind.max_attempts := coalesce(cyclone_option_integer(v_options -> 'maxAttempts', 'maxAttempts', 1, 1000), v_kind.max_attempts);
  IF v_options ? 'maxReclaims' THEN
    v_kind.max_reclaims := cyclone_option_integer(v_options -> 'maxReclaims', 'maxReclaims', 0, 1000000);
  END IF;
  v_kind.timeout_ms := coalesce(cyclone_option_ms(v_options -> 'timeout', 'timeout', true), v_kind.timeout_ms);
  v_kind.retention_ms := coalesce(cyclone_option_ms(v_options -> 'retention', 'retention', false), v_kind.retention_ms);
  v_process_in := cyclone_option_ms(v_options -> 'processIn', 'processIn', false);
  IF v_options ? 'processAt' THEN
    IF v_options ? 'processIn' THEN
      RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
        MESSAGE = 'cyclone_enqueue: options "processAt" and "processIn" cannot be used together; pick one.';
    END IF;
    v_process_at := cyclone_option_time(v_options -> 'processAt', 'processAt');
  END IF;

  v_unique := v_options -> 'unique';
  IF jsonb_typeof(v_unique) = 'object' THEN
    FOR v_option IN SELECT jsonb_object_keys(v_unique) LOOP
      IF NOT v_option = ANY (ARRAY['key', 'onConflict', 'debounce']) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
          MESSAGE = format('cyclone_enqueue: unknown option "%s" in "unique". Known options: key, onConflict, debounce.',
                           left(v_option, 100));
      END IF;
    END LOOP;
    v_key := cyclone_option_name(coalesce(v_unique -> 'key', 'null'), 'unique.key');
    v_debounce_ms := cyclone_option_ms(v_unique -> 'debounce', 'unique.debounce', true);
    IF v_unique ? 'onConflict' THEN
      v_on_conflict := CASE WHEN jsonb_typeof(v_unique -> 'onConflict') = 'string' THEN v_unique ->> 'onConflict' END;
      IF v_on_conflict IS NULL OR v_on_conflict NOT IN ('error', 'keep', 'replace') THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
          MESSAGE = format('cyclone_enqueue: option "unique.onConflict" must be ''error'', ''keep'' or ''replace''; got %s.',
                           left((v_unique -> 'onConflict')::text, 100));
      END IF;
    ELSIF v_debounce_ms IS NOT NULL THEN
      v_on_conflict := 'keep';
    END IF;
    IF v_debounce_ms IS NOT NULL AND v_on_conflict = 'error' THEN
      RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
        MESSAGE = 'cyclone_enqueue: option "unique.debounce" pushes the holder back and returns its run id, so it cannot go with onConflict ''error''; use ''keep'' (the default with debounce) or ''replace''.';
    END IF;
  ELSIF v_unique IS NOT NULL THEN
    IF jsonb_typeof(v_unique) <> 'string' THEN
      RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
        MESSAGE = format('cyclone_enqueue: option "unique" must be a string key or {"key": ..., "onConflict": ..., "debounce": ...}; got %s.',
                         left(v_unique::text, 100));
    END IF;
    v_key := cyclone_option_name(v_unique, 'unique');
  END IF;
  -- Its backoff after each attempt but the last, as the client stores it for these attempts.
  v_kind.backoff_ms := CASE WHEN v_kind.max_attempts > 1 THEN v_kind.backoff_ms[1:v_kind.max_attempts - 1] END;
  -- A debounced run starts a debounce after its first enqueue, unless told otherwise.
  v_process_in := coalesce(v_process_in, CASE WHEN v_process_at IS NULL THEN v_debounce_ms END, 0);

  v_text := v_input::text;
  IF octet_length(v_text) > v_kind.max_payload_bytes THEN
    RAISE EXCEPTION USING ERRCODE = 'program_limit_exceeded',
      MESSAGE = format('cyclone_enqueue: the input is %s bytes of JSON, over the limit of %s bytes of step kind %L (module option maxPayloadBytes).',
                       octet_length(v_text), v_kind.max_payload_bytes, cyclone_enqueue.kind),
      HINT = 'Store large data elsewhere and pass a reference.';
  END IF;
  -- The client's limit on nesting (MAX_JSON_DEPTH): looked for only in an input with that many brackets.
  IF length(v_text) - length(translate(v_text, '[{', '')) > 1000
     AND jsonb_path_exists(v_input, 'strict $.**{1000} ? (@.type() == "array" || @.type() == "object")') THEN
    RAISE EXCEPTION USING ERRCODE = 'program_limit_exceeded',
      MESSAGE = 'cyclone_enqueue: the input is nested more than 1000 levels deep; flatten it.';
  END IF;

  LOOP
    SELECT j.id INTO v_inserted
      FROM cyclone_insert_jobs(ARRAY[v_id], ARRAY[cyclone_enqueue.kind], ARRAY[v_input], ARRAY[v_kind.queue], ARRAY[v_key],
                               ARRAY[v_kind.retention_ms], ARRAY[v_kind.priority], ARRAY[v_kind.max_attempts],
                               ARRAY[v_kind.max_reclaims], ARRAY[v_kind.timeout_ms], ARRAY[v_process_at],
                               ARRAY[v_process_in], ARRAY[NULL::jsonb], ARRAY[v_kind.backoff_ms::text],
                               ARRAY[v_kind.flow_key], ARRAY[NULL::text], true) j;
    IF v_inserted IS NOT NULL THEN
      RETURN v_inserted;
    END IF;
    -- The key is held: as the client's enqueue does, by onConflict.
    IF v_on_conflict = 'error' THEN
      v_holder := (SELECT k.run_id FROM cyclone_unique_keys k WHERE k.unique_key = v_key);
      CONTINUE WHEN v_holder IS NULL;
      RAISE EXCEPTION USING ERRCODE = 'unique_violation',
        MESSAGE = format('cyclone_enqueue: unique key %L is held by run %s, which has not finished.', v_key, v_holder),
        DETAIL = v_holder::text,
        HINT = 'Use {"unique": {"key": ..., "onConflict": "keep"}} to get the holder''s run id instead.';
    END IF;
    SELECT c.holder, c.outcome INTO v_holder, v_outcome
      FROM cyclone_unique_conflict(v_key, cyclone_enqueue.kind, v_on_conflict = 'replace', v_input, v_kind.flow_key, NULL, v_debounce_ms) c;
    CONTINUE WHEN v_holder IS NULL;
    IF v_outcome = 'started' THEN
      RAISE EXCEPTION USING ERRCODE = 'unique_violation',
        MESSAGE = format('cyclone_enqueue: unique key %L is held by run %s, which has started, so its input cannot be replaced.', v_key, v_holder),
        DETAIL = v_holder::text;
    END IF;
    RETURN v_holder;
  END LOOP;
END $$;

-- A time-ordered UUID (version 7), as the client makes run ids (src/common/uuid7.ts):
-- 48 bits of Unix milliseconds, then random bits. Its milliseconds choose the run's partition.
CREATE OR REPLACE FUNCTION cyclone_uuid7() RETURNS uuid
LANGUAGE sql VOLATILE AS $$
  SELECT (lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0')
          || '7' || substr(r, 14, 3) || substr(r, 17))::uuid
    FROM replace(gen_random_uuid()::text, '-', '') AS r;
$$;

-- A name option (a queue, a unique key): a non-empty string of at most 200
-- characters, as checkName (src/common/validate.ts). NULL when not given.
CREATE OR REPLACE FUNCTION cyclone_option_name(p_value jsonb, p_option text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_value IS NULL THEN
    RETURN NULL;
  END IF;
  IF jsonb_typeof(p_value) <> 'string' OR p_value #>> '{}' ~ '^\s*$' OR char_length(p_value #>> '{}') > 200 THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = format('cyclone_enqueue: option "%s" must be a non-empty string of at most 200 characters; got %s.',
                       p_option, left(p_value::text, 100));
  END IF;
  RETURN p_value #>> '{}';
END $$;

-- An integer option within [p_min, p_max]. NULL when not given.
CREATE OR REPLACE FUNCTION cyclone_option_integer(p_value jsonb, p_option text, p_min integer, p_max integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_number numeric;
BEGIN
  IF p_value IS NULL THEN
    RETURN NULL;
  END IF;
  IF jsonb_typeof(p_value) = 'number' THEN
    v_number := p_value::numeric;
  END IF;
  IF v_number IS NULL OR v_number <> trunc(v_number) OR v_number < p_min OR v_number > p_max THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = format('cyclone_enqueue: option "%s" must be an integer from %s to %s; got %s.',
                       p_option, p_min, p_max, left(p_value::text, 100));
  END IF;
  RETURN v_number;
END $$;

-- A duration option in whole milliseconds, as toMs (src/common/duration.ts):
-- a number of milliseconds, or a string such as '500ms', '30s', '5m', '2h',
-- '1d' or '1h30m'; at most 100 years; above zero when p_positive. NULL when not given.
CREATE OR REPLACE FUNCTION cyclone_option_ms(p_value jsonb, p_option text, p_positive boolean) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_text text;
  v_ms   numeric;
BEGIN
  IF p_value IS NULL THEN
    RETURN NULL;
  END IF;
  IF jsonb_typeof(p_value) = 'number' THEN
    v_ms := CASE WHEN p_value::numeric >= 0 THEN round(p_value::numeric) END;
  ELSIF jsonb_typeof(p_value) = 'string' THEN
    v_text := btrim(p_value #>> '{}');
    IF v_text ~ '^(\d+(\.\d+)?(ms|s|m|h|d))+$' THEN
      SELECT round(sum(m[1]::numeric * CASE m[2] WHEN 'ms' THEN 1 WHEN 's' THEN 1000 WHEN 'm' THEN 60000
                                                  WHEN 'h' THEN 3600000 ELSE 86400000 END))
        INTO v_ms FROM regexp_matches(v_text, '(\d+(?:\.\d+)?)(ms|s|m|h|d)', 'g') AS m;
    END IF;
  END IF;
  IF v_ms IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = format('cyclone_enqueue: option "%s" must be a non-negative number of milliseconds or a string such as ''500ms'', ''30s'', ''5m'', ''2h'' or ''1d''; got %s.',
                       p_option, left(p_value::text, 100));
  END IF;
  IF v_ms > 3153600000000 THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = format('cyclone_enqueue: option "%s" must be at most 3153600000000 ms (100 years); got %s.', p_option, left(p_value::text, 100));
  END IF;
  IF p_positive AND v_ms = 0 THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = format('cyclone_enqueue: option "%s" must be greater than zero; leave it out for no limit.', p_option);
  END IF;
  RETURN v_ms;
END $$;

-- A time option: an ISO 8601 date or time, such as '2026-12-01T08:00:00Z'
-- (without an offset, the session's time zone applies).
CREATE OR REPLACE FUNCTION cyclone_option_time(p_value jsonb, p_option text) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_time timestamptz;
BEGIN
  IF jsonb_typeof(p_value) = 'string' AND p_value #>> '{}' ~ '^\s*\d{4}-\d{2}-\d{2}' THEN
    BEGIN
      v_time := (p_value #>> '{}')::timestamptz;
    EXCEPTION WHEN data_exception THEN
      v_time := NULL;
    END;
  END IF;
  IF v_time IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = format('cyclone_enqueue: option "%s" must be an ISO 8601 time such as "2026-12-01T08:00:00Z"; got %s.',
                       p_option, left(p_value::text, 100));
  END IF;
  RETURN v_time;
END $$;
