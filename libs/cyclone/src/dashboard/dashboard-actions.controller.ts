import { HttpCode, Injectable, Param, Post, Query, UseFilters, UseInterceptors } from '@nestjs/common';
import { CycloneClient } from '../client/cyclone.client.js';
import type { DashboardActionResult, DashboardBulkResult } from './dashboard-api.interface.js';
import { ApiHeaders } from './dashboard-api.controller.js';
import { DashboardBulk } from './dashboard-bulk.js';
import { DashboardExceptionFilter } from './dashboard-exception.filter.js';
import { BULK_LIMIT } from './dashboard.constants.js';
import { parseBulkAction, parseBulkQuery, parseName, parseNoQuery, parseRunId, type QueryParams } from './dashboard-params.js';
import { ServerTimingInterceptor } from './server-timing.interceptor.js';

/**
 * The actions: POST only, each one a CycloneClient call. CycloneDashboardModule
 * mounts this controller behind the app's guard and the CSRF guard, and not
 * at all when the dashboard is read-only, so a read-only dashboard has no
 * route that changes anything.
 */
@Injectable()
@UseFilters(DashboardExceptionFilter)
@UseInterceptors(ServerTimingInterceptor)
export class DashboardActionsController {
  constructor(
    private readonly client: CycloneClient,
    private readonly bulk: DashboardBulk,
  ) {}

  @Post('api/runs/:runId/cancel')
  @HttpCode(200)
  @ApiHeaders()
  async cancel(@Param('runId') runId: string, @Query() query: QueryParams): Promise<DashboardActionResult> {
    parseNoQuery(query);
    return { changed: await this.client.cancel(parseRunId(runId)) };
  }

  /** Reopens every discarded node of the run. */
  @Post('api/runs/:runId/retry')
  @HttpCode(200)
  @ApiHeaders()
  async retryAll(@Param('runId') runId: string, @Query() query: QueryParams): Promise<DashboardActionResult> {
    parseNoQuery(query);
    const reopened = await this.client.retryAll(parseRunId(runId));
    return { changed: reopened > 0, reopened };
  }

  @Post('api/runs/:runId/nodes/:nodeId/retry')
  @HttpCode(200)
  @ApiHeaders()
  async retry(
    @Param('runId') runId: string,
    @Param('nodeId') nodeId: string,
    @Query() query: QueryParams,
  ): Promise<DashboardActionResult> {
    parseNoQuery(query);
    await this.client.retry(parseRunId(runId), parseName(nodeId, 'nodeId'));
    return { changed: true, reopened: 1 };
  }

  /** Makes a node that waits (a delay, a backoff, a snooze) due now; no attempt is consumed. */
  @Post('api/runs/:runId/nodes/:nodeId/run-now')
  @HttpCode(200)
  @ApiHeaders()
  async runNow(
    @Param('runId') runId: string,
    @Param('nodeId') nodeId: string,
    @Query() query: QueryParams,
  ): Promise<DashboardActionResult> {
    parseNoQuery(query);
    return { changed: await this.client.runNow(parseRunId(runId), parseName(nodeId, 'nodeId')) };
  }

  /**
   * Retries or cancels the runs the filters match, as confirmed: `upTo` and
   * `confirmed` from the preview (GET api/bulk/:action). See DashboardBulk.
   */
  @Post('api/bulk/:action')
  @HttpCode(200)
  @ApiHeaders()
  bulkAction(@Param('action') action: string, @Query() query: QueryParams): Promise<DashboardBulkResult> {
    return this.bulk.act(parseBulkAction(action), parseBulkQuery(query, BULK_LIMIT));
  }

  @Post('api/runs/:runId/pause')
  @HttpCode(200)
  @ApiHeaders()
  async pause(@Param('runId') runId: string, @Query() query: QueryParams): Promise<DashboardActionResult> {
    parseNoQuery(query);
    return { changed: await this.client.pause(parseRunId(runId)) };
  }

  @Post('api/runs/:runId/resume')
  @HttpCode(200)
  @ApiHeaders()
  async resume(@Param('runId') runId: string, @Query() query: QueryParams): Promise<DashboardActionResult> {
    parseNoQuery(query);
    return { changed: await this.client.resume(parseRunId(runId)) };
  }

  @Post('api/queues/:queue/pause')
  @HttpCode(200)
  @ApiHeaders()
  async pauseQueue(@Param('queue') queue: string, @Query() query: QueryParams): Promise<DashboardActionResult> {
    parseNoQuery(query);
    return { changed: await this.client.pauseQueue(parseName(queue, 'queue')) };
  }

  @Post('api/queues/:queue/resume')
  @HttpCode(200)
  @ApiHeaders()
  async resumeQueue(@Param('queue') queue: string, @Query() query: QueryParams): Promise<DashboardActionResult> {
    parseNoQuery(query);
    return { changed: await this.client.resumeQueue(parseName(queue, 'queue')) };
  }
}
