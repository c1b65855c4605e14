import { applyDecorators, Get, Header, Injectable, Param, Query, UseFilters, UseInterceptors } from '@nestjs/common';
import type { DashboardQueues, DashboardRun, DashboardRuns, DashboardSchedules } from './dashboard-api.interface.js';
import { DashboardExceptionFilter } from './dashboard-exception.filter.js';
import { parseNoQuery, parseRunId, parseRunsQuery, type QueryParams } from './dashboard-params.js';
import { DashboardReader } from './dashboard-reader.js';
import { ServerTimingInterceptor } from './server-timing.interceptor.js';

export const ApiHeaders = () =>
  applyDecorators(Header('Cache-Control', 'no-store'), Header('X-Content-Type-Options', 'nosniff'));

/**
 * The JSON API the pages are drawn from, under `${path}/api`. Every
 * parameter is checked before a query runs (dashboard-params.ts).
 */
@Injectable()
@UseFilters(DashboardExceptionFilter)
@UseInterceptors(ServerTimingInterceptor)
export class DashboardApiController {
  constructor(private readonly reader: DashboardReader) {}

  @Get('api/queues')
  @ApiHeaders()
  queues(@Query() query: QueryParams): Promise<DashboardQueues> {
    parseNoQuery(query);
    return this.reader.queues();
  }

  @Get('api/runs')
  @ApiHeaders()
  runs(@Query() query: QueryParams): Promise<DashboardRuns> {
    return this.reader.runs(parseRunsQuery(query));
  }

  @Get('api/runs/:runId')
  @ApiHeaders()
  run(@Param('runId') runId: string, @Query() query: QueryParams): Promise<DashboardRun> {
    parseNoQuery(query);
    return this.reader.run(parseRunId(runId));
  }

  @Get('api/schedules')
  @ApiHeaders()
  schedules(@Query() query: QueryParams): Promise<DashboardSchedules> {
    parseNoQuery(query);
    return this.reader.schedules();
  }
}
