-- Restores the functions' settings of version 17: JIT as the server sets it.

ALTER FUNCTION cyclone_claim_flow RESET jit;
ALTER FUNCTION cyclone_claim_steps RESET jit;
ALTER FUNCTION cyclone_claim_workflows RESET jit;
ALTER FUNCTION cyclone_complete_steps RESET jit;
ALTER FUNCTION cyclone_deliver_results RESET jit;
ALTER FUNCTION cyclone_insert_and_start RESET jit;
ALTER FUNCTION cyclone_load_history RESET jit;
ALTER FUNCTION cyclone_record_nodes RESET jit;
ALTER FUNCTION cyclone_release_successors RESET jit;
ALTER FUNCTION cyclone_settle_runs RESET jit;
ALTER FUNCTION cyclone_start_dispatched RESET jit;
ALTER FUNCTION cyclone_start_steps RESET jit;
ALTER FUNCTION cyclone_wake_workflows RESET jit;

DELETE FROM cyclone_schema_migrations WHERE version = 18;
