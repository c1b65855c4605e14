import { ArgumentsHost, Catch, HttpStatus, type ExceptionFilter } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { CycloneError } from '../libs/cyclone/src/index.js';

/** Cyclone's stable error codes as HTTP statuses, so clients see 404/409/400 rather than 500. */
const STATUS: Record<string, HttpStatus> = {
  duplicate: HttpStatus.CONFLICT,
  run_not_found: HttpStatus.NOT_FOUND,
  step_not_found: HttpStatus.NOT_FOUND,
  unknown_signal: HttpStatus.NOT_FOUND,
  unknown_workflow: HttpStatus.NOT_FOUND,
  invalid_option: HttpStatus.BAD_REQUEST,
  invalid_input: HttpStatus.BAD_REQUEST,
  invalid_state: HttpStatus.CONFLICT,
  run_failed: HttpStatus.UNPROCESSABLE_ENTITY,
  run_cancelled: HttpStatus.CONFLICT,
  result_timeout: HttpStatus.ACCEPTED,
};

@Catch(CycloneError)
export class CycloneErrorFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(error: CycloneError, host: ArgumentsHost): void {
    const status = STATUS[error.code] ?? HttpStatus.INTERNAL_SERVER_ERROR;
    const body = { statusCode: status, code: error.code, message: error.message };
    const extra = 'runId' in error ? { runId: error.runId } : {};
    this.adapterHost.httpAdapter.reply(host.switchToHttp().getResponse(), { ...body, ...extra }, status);
  }
}
