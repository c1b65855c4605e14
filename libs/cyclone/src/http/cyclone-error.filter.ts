import { Catch, HttpStatus, Logger, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { messages } from '../cyclone.messages.js';
import { CycloneError } from '../errors/cyclone.error.js';

/**
 * HTTP status of each error code a caller can cause or act on. Codes not
 * here (a bad module option, a missing migration) are the app's own fault
 * and stay 500.
 */
export const CYCLONE_ERROR_STATUS: Readonly<Record<string, HttpStatus>> = {
  run_not_found: HttpStatus.NOT_FOUND,
  step_not_found: HttpStatus.NOT_FOUND,
  unknown_signal: HttpStatus.NOT_FOUND,
  unknown_workflow: HttpStatus.NOT_FOUND,
  queue_not_found: HttpStatus.NOT_FOUND,
  duplicate: HttpStatus.CONFLICT,
  invalid_state: HttpStatus.CONFLICT,
  count_changed: HttpStatus.CONFLICT,
  run_cancelled: HttpStatus.CONFLICT,
  invalid_option: HttpStatus.BAD_REQUEST,
  invalid_input: HttpStatus.BAD_REQUEST,
  invalid_parameter: HttpStatus.BAD_REQUEST,
  invalid_key: HttpStatus.BAD_REQUEST,
  unknown_step: HttpStatus.BAD_REQUEST,
  csrf_rejected: HttpStatus.FORBIDDEN,
  run_failed: HttpStatus.UNPROCESSABLE_ENTITY,
  result_timeout: HttpStatus.GATEWAY_TIMEOUT,
  database_unavailable: HttpStatus.SERVICE_UNAVAILABLE,
  outcome_unknown: HttpStatus.SERVICE_UNAVAILABLE,
};

/**
 * What a client is told of the errors whose messages name the database
 * server (host, port, database): its address is the operator's business,
 * so the full message goes to the log and the client gets this.
 */
function publicMessage(error: CycloneError): string | undefined {
  if (error.code === 'database_unavailable') return messages.databaseUnavailablePublic();
  if (error.code === 'outcome_unknown') return messages.outcomeUnknownPublic((error as { runIds?: readonly string[] }).runIds ?? []);
  return undefined;
}

/** While the database is away every request fails alike: one log line per code this often, with the count in between. */
const LOG_EVERY_MS = 10_000;
const logger = new Logger('CycloneErrorFilter');
const logged = new Map<string, { at: number; unlogged: number }>();

/**
 * The JSON body of a CycloneError's answer: `{ statusCode, code, message }`,
 * plus `runId`/`runIds` when the error names them. A message that names the
 * database server is logged (at most once per code every LOG_EVERY_MS) and
 * replaced by one that does not.
 */
export function cycloneErrorBody(error: CycloneError, status: number): Record<string, unknown> {
  const told = publicMessage(error);
  if (told !== undefined) logThrottled(error);
  const body: Record<string, unknown> = { statusCode: status, code: error.code, message: told ?? error.message };
  const runId = (error as { runId?: unknown }).runId;
  if (runId !== undefined) body.runId = runId;
  const runIds = (error as { runIds?: unknown }).runIds;
  if (runIds !== undefined) body.runIds = runIds;
  return body;
}

function logThrottled(error: CycloneError): void {
  const now = Date.now();
  const last = logged.get(error.code);
  if (last && now - last.at < LOG_EVERY_MS) {
    last.unlogged += 1;
    return;
  }
  const more = last?.unlogged ? ` (${last.unlogged} more like it since the last line)` : '';
  logger.warn(`Answered ${error.code}: ${error.message}${more}`);
  logged.set(error.code, { at: now, unlogged: 0 });
}

/**
 * Answers a `CycloneError` thrown by a route with its status and
 * `{ statusCode, code, message }` (and `runId` when the error names one),
 * instead of Nest's 500. Use it with `app.useGlobalFilters(...)`, as
 * `{ provide: APP_FILTER, useClass: CycloneErrorFilter }`, or `@UseFilters`.
 * It works with any HTTP adapter (Express, Fastify).
 */
@Catch(CycloneError)
export class CycloneErrorFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(error: CycloneError, host: ArgumentsHost): void {
    const status = CYCLONE_ERROR_STATUS[error.code] ?? HttpStatus.INTERNAL_SERVER_ERROR;
    this.adapterHost.httpAdapter.reply(host.switchToHttp().getResponse(), cycloneErrorBody(error, status), status);
  }
}
