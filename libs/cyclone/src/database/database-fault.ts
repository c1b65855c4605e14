import { CycloneError } from '../errors/cyclone.error.js';
import { DatabaseUnavailableError } from '../errors/database-unavailable.error.js';
import { InvalidInputError } from '../errors/invalid-input.error.js';
import { OutcomeUnknownError } from '../errors/outcome-unknown.error.js';
import { SchemaError } from '../errors/schema.error.js';
import { messages } from '../cyclone.messages.js';

/**
 * What a failed statement tells the caller:
 * - `unsent`: the connection was already broken, so the statement was never
 *   sent;
 * - `lost`: the connection broke while the statement was on its way or
 *   running; a write may or may not have committed;
 * - `timeout`: statement_timeout cancelled it (rolled back);
 * - `data`: the server refused the values (rolled back);
 * - `schema`: a table, column or function of Cyclone's is missing;
 * - `refused`: any other server error (rolled back): a deadlock victim, a
 *   read-only standby, out of resources, a permission;
 * - `other`: not a database error at all.
 */
export type Fault = 'unsent' | 'lost' | 'timeout' | 'data' | 'schema' | 'refused' | 'other';

/** What `pg` says (with no code) of a query on a client whose connection had already broken: it sent nothing. */
const UNSENT_MESSAGES = /is not queryable/;
/** What `pg` says (with no code) of a connection that broke under a query. */
const LOST_MESSAGES = /^Connection terminated/;

export function faultOf(err: unknown): Fault {
  const { code, message } = driverError(err);
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) {
    // 57P01-57P05: the server ended this session (shutdown, crash, idle timeout); 08: connection exceptions.
    if (code.startsWith('57P') || code.startsWith('08')) return 'lost';
    if (code === STATEMENT_TIMEOUT) return 'timeout';
    if (code.startsWith('22') || code.startsWith('23') || code === '54000') return 'data';
    if (code === '42P01' || code === '42883' || code === '42703' || code === '42704') return 'schema';
    return 'refused';
  }
  // A network error (ECONNRESET, EPIPE, ETIMEDOUT…) or pg's own words for a broken connection.
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return 'lost';
  if (typeof message === 'string' && UNSENT_MESSAGES.test(message)) return 'unsent';
  if (typeof message === 'string' && LOST_MESSAGES.test(message)) return 'lost';
  return 'other';
}

/** Whether the connection a statement ran on is broken and must not be reused. */
export function isConnectionLost(err: unknown): boolean {
  const fault = faultOf(err);
  return fault === 'lost' || fault === 'unsent';
}

/**
 * Whether an error says the server could not be reached or the connection
 * was lost, as opposed to a server that answered with an error (a statement
 * timeout among them): the errors a database outage gives every caller.
 */
export function isUnreachable(err: unknown): boolean {
  if (err instanceof OutcomeUnknownError) return true;
  if (err instanceof DatabaseUnavailableError) return err.reason !== STATEMENT_TIMEOUT;
  return isConnectionLost(err);
}

/** SQLSTATE of a statement cancelled by statement_timeout. */
const STATEMENT_TIMEOUT = '57014';

export interface CallFaultContext {
  /** host:port/database, for messages (never the password). */
  where: string;
  /** The module's statementTimeout in ms, for the message; null when it is not Cyclone's to say. */
  statementTimeoutMs: number | null;
  /**
   * For a write: the runs it writes. A connection lost under it leaves the
   * outcome unknown. Null for a read, or a write inside the caller's own
   * transaction (which cannot commit once its connection is gone).
   */
  runIds: readonly string[] | null;
}

/**
 * The CycloneError a public call throws for what went wrong in the
 * database. CycloneErrors pass through; an error that did not come from the
 * database is returned as it is.
 */
export function toCycloneError(err: unknown, context: CallFaultContext): unknown {
  if (err instanceof CycloneError) return err;
  const { code, message } = driverError(err);
  const reason = `${typeof message === 'string' && message !== '' ? message : 'no message'}${typeof code === 'string' ? ` (${code})` : ''}`;
  const reasonCode = typeof code === 'string' ? code : undefined;
  switch (faultOf(err)) {
    case 'unsent':
      return new DatabaseUnavailableError(
        messages.databaseUnavailable(context.where, `the connection had been lost: ${reason}`),
        reasonCode,
        err,
      );
    case 'lost':
      if (context.runIds !== null) return new OutcomeUnknownError(context.runIds, context.where, reason, err);
      return new DatabaseUnavailableError(
        messages.databaseUnavailable(context.where, `the connection was lost: ${reason}`),
        reasonCode,
        err,
      );
    case 'timeout':
      return new DatabaseUnavailableError(messages.statementTimedOut(context.where, context.statementTimeoutMs), reasonCode, err);
    case 'data':
      return new InvalidInputError(`PostgreSQL refused the values of the call: ${reason}.`, err);
    case 'schema':
      return new SchemaError(messages.schemaUnusable(reason), err);
    case 'refused':
      return new DatabaseUnavailableError(messages.databaseUnavailable(context.where, reason), reasonCode, err);
    default:
      return err;
  }
}

/** Awaits `work`, throwing its failure as toCycloneError makes it. */
export async function settle<T>(work: Promise<T>, context: CallFaultContext): Promise<T> {
  try {
    return await work;
  } catch (err) {
    throw toCycloneError(err, context);
  }
}

/** SQLSTATE undefined_function: the database is at a schema version before this client's. */
export const UNDEFINED_FUNCTION = '42883';

/** The SQLSTATE of a server error, also when TypeORM wrapped it. */
export function sqlStateOf(err: unknown): string | undefined {
  const { code } = driverError(err);
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** The error `pg` raised, also when TypeORM wrapped it (QueryFailedError.driverError). */
function driverError(err: unknown): { code?: unknown; message?: unknown } {
  if (typeof err !== 'object' || err === null) return {};
  const inner = (err as { driverError?: unknown }).driverError;
  const source = typeof inner === 'object' && inner !== null ? inner : err;
  return { code: (source as { code?: unknown }).code, message: (source as { message?: unknown }).message };
}
