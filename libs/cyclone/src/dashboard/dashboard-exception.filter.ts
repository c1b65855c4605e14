import { Catch, HttpException, HttpStatus, Logger, type ArgumentsHost } from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';
import { CycloneError } from '../errors/cyclone.error.js';
import { CYCLONE_ERROR_STATUS, cycloneErrorBody } from '../http/cyclone-error.filter.js';

/**
 * The dashboard's answers to errors, whatever filters the app has: a
 * CycloneError as its status and `{ statusCode, code, message }`; Nest's own
 * HTTP exceptions (a guard's 401 or 403, a 404) as Nest answers them; and
 * anything else as a 500 that says where to look, logged here, never with
 * the error's text (it could be a database error quoting SQL or data).
 */
@Catch()
export class DashboardExceptionFilter extends BaseExceptionFilter {
  private readonly logger = new Logger('CycloneDashboard');

  override catch(error: unknown, host: ArgumentsHost): void {
    if (error instanceof HttpException) return super.catch(error, host);
    const adapter = this.applicationRef ?? this.httpAdapterHost!.httpAdapter;
    const response = host.switchToHttp().getResponse();
    let status: number = HttpStatus.INTERNAL_SERVER_ERROR;
    let body: Record<string, unknown>;
    if (error instanceof CycloneError && CYCLONE_ERROR_STATUS[error.code] !== undefined) {
      status = CYCLONE_ERROR_STATUS[error.code];
      body = cycloneErrorBody(error, status);
      const parameter = (error as { parameter?: unknown }).parameter;
      if (parameter !== undefined) body.parameter = parameter;
    } else {
      this.logger.error(`A dashboard request failed: ${(error as Error)?.stack ?? String(error)}`);
      body = {
        statusCode: status,
        code: 'internal_error',
        message: 'The dashboard could not answer this request; the server log says why.',
      };
    }
    if (adapter.isHeadersSent(response)) adapter.end(response);
    else adapter.reply(response, body, status);
  }
}
