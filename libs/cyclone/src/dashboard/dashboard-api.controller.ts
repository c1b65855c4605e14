import { applyDecorators, Get, Header, Injectable, Param, Query, UseFilters, UseInterceptors } from '@nestjs/common';
import type {
  DashboardBulkPreview,
  DashboardClients,
  DashboardNames,
  DashboardQueues,
  DashboardRun,
  DashboardRuns,
  DashboardSchedules,
  DashboardThroughput,
} from './dashboard-api.interface.js';
import { DashboardBulk } from './dashboard-bulk.js';
import { DashboardExceptionFilter } from './dashboard-exception.filter.js';
import {
  parseBulkAction,
  parseBulkPreview,
  parseName,
  parseNoQuery,
  parseRunId,
  parseRunsQuery,
  type QueryParams,
} from './dashboard-params.js';
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
  constructor(
    private readonly reader: DashboardReader,
    private readonly bulk: DashboardBulk,
  ) {}

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

  /** The kinds and queues the runs page's pickers offer. */
  @Get('api/names')
  @ApiHeaders()
  names(@Query() query: QueryParams): Promise<DashboardNames> {
    parseNoQuery(query);
    return this.reader.names();
  }

  @Get('api/clients')
  @ApiHeaders()
  clients(@Query() query: QueryParams): Promise<DashboardClients> {
    parseNoQuery(query);
    return this.reader.clients();
  }

  @Get('api/queues/:queue/throughput')
  @ApiHeaders()
  throughput(@Param('queue') queue: string, @Query() query: QueryParams): Promise<DashboardThroughput> {
    parseNoQuery(query);
    return this.reader.throughput(parseName(queue, 'queue'));
  }

  /** How many runs a bulk action would act on, with the runs list's filters, for the operator to confirm. */
  @Get('api/bulk/:action')
  @ApiHeaders()
  bulkPreview(@Param('action') action: string, @Query() query: QueryParams): Promise<DashboardBulkPreview> {
    return this.bulk.preview(parseBulkAction(action), parseBulkPreview(query));
  }
}
