import type pg from 'pg';

/**
 * A runtime statement: its SQL, a name, and the types of its parameters and
 * rows, so a call site that passes the wrong values does not compile. A
 * prepared statement is parsed and planned once per connection, under its
 * name: for the hot paths (claim, complete, enqueue, heartbeat), which run
 * thousands of times a second.
 */
export interface Statement<P extends readonly unknown[] = readonly unknown[], R extends pg.QueryResultRow = pg.QueryResultRow> {
  readonly name: string;
  readonly text: string;
  readonly prepared: boolean;
  /** Type carrier only; never set at run time. */
  readonly __types?: (params: P) => R;
}

export function statement<P extends readonly unknown[], R extends pg.QueryResultRow = Record<string, never>>(
  name: string,
  text: string,
  options: { prepared?: boolean } = {},
): Statement<P, R> {
  return Object.freeze({ name, text, prepared: options.prepared ?? false });
}

/** The parameter tuple of a statement. */
export type StatementParams<S> = S extends Statement<infer P, pg.QueryResultRow> ? P : never;

/** Anything that runs a query: the pool, a pooled client, a dedicated client. */
export interface Queryable {
  query<R extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
}

/** Runs a statement on `on`; prepared statements go under their name. */
export function execute<P extends readonly unknown[], R extends pg.QueryResultRow>(
  on: Queryable,
  stmt: Statement<P, R>,
  params: P,
): Promise<pg.QueryResult<R>> {
  const values = params as unknown as unknown[];
  return on.query<R>(stmt.prepared ? { name: stmt.name, text: stmt.text, values } : { text: stmt.text, values });
}
