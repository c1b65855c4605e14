import { Catch, HttpStatus, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
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
    const body: Record<string, unknown> = { statusCode: status, code: error.code, message: error.message };
    const runId = (error as { runId?: unknown }).runId;
    if (runId !== undefined) body.runId = runId;
    const runIds = (error as { runIds?: unknown }).runIds;
    if (runIds !== undefined) body.runIds = runIds;
    this.adapterHost.httpAdapter.reply(host.switchToHttp().getResponse(), body, status);
  }
}
