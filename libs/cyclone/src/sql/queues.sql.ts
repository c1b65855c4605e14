import { statement } from '../database/statement.js';

/** Records queues as existing (the ones a client serves or its steps name); each is written once. */
export const REGISTER_QUEUES = statement<[queues: string[]]>(
  'cyclone_register_queues',
  /* sql */ `INSERT INTO cyclone_queues (queue) SELECT unnest($1::text[]) ORDER BY 1 ON CONFLICT DO NOTHING`,
);
