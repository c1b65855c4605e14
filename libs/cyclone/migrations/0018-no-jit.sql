-- Cyclone's schema, version 18: JIT off in the functions that turn planner
-- methods off. On PostgreSQL 17 and earlier a disabled method is priced at
-- 10^10, so any plan that still used one (a sequential scan of a table with
-- a handful of rows, such as cyclone_claim_floor or cyclone_dispatch) cost
-- past jit_above_cost, and with JIT available every call compiled its
-- plan: 25 ms an enqueue that starts its job, against 0.8 ms without, on
-- PostgreSQL 15. A statement of a few index probes never gains from JIT.
-- PostgreSQL 18 counts disabled nodes instead of pricing them, so it was
-- not affected. Settings only: bodies and arguments are unchanged.

ALTER FUNCTION cyclone_claim_flow SET jit = off;
ALTER FUNCTION cyclone_claim_steps SET jit = off;
ALTER FUNCTION cyclone_claim_workflows SET jit = off;
ALTER FUNCTION cyclone_complete_steps SET jit = off;
ALTER FUNCTION cyclone_deliver_results SET jit = off;
ALTER FUNCTION cyclone_insert_and_start SET jit = off;
ALTER FUNCTION cyclone_load_history SET jit = off;
ALTER FUNCTION cyclone_record_nodes SET jit = off;
ALTER FUNCTION cyclone_release_successors SET jit = off;
ALTER FUNCTION cyclone_settle_runs SET jit = off;
ALTER FUNCTION cyclone_start_dispatched SET jit = off;
ALTER FUNCTION cyclone_start_steps SET jit = off;
ALTER FUNCTION cyclone_wake_workflows SET jit = off;

INSERT INTO cyclone_schema_migrations (version, name) VALUES (18, 'CycloneNoJit1766476800000')
  ON CONFLICT DO NOTHING;
