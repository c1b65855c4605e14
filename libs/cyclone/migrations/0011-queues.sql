-- Cyclone's schema, version 11: the queues that exist. A client records, at
-- startup, every queue it serves and every queue its steps and workflows
-- name; pauseQueue and resumeQueue refuse a name that is none of these and
-- holds no runs, so a typo cannot leave a paused queue nobody serves.
CREATE TABLE cyclone_queues (
  queue         text PRIMARY KEY,
  registered_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO cyclone_schema_migrations (version, name) VALUES (11, 'CycloneQueues1765699200000')
  ON CONFLICT DO NOTHING;
