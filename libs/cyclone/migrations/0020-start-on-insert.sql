-- Cyclone's schema, version 20: a job that an idle worker of the enqueuing
-- client takes is inserted already started, leased to that worker
-- (cyclone_insert_jobs_leased), instead of inserted available and then
-- updated in the same statement: one row version instead of two, and no
-- claim index entry or outbox row for a step nobody claims. The enqueue
-- reads the queue's bands before it inserts, and derives the queues to wake
-- from what it inserted instead of reading its steps again.

\ir ../sql/functions/insert-jobs.sql
\ir ../sql/functions/insert-and-start.sql

INSERT INTO cyclone_schema_migrations (version, name) VALUES (20, 'CycloneStartOnInsert1766649600000')
  ON CONFLICT DO NOTHING;
