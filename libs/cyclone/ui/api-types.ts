import type {
  DashboardActionResult,
  DashboardBulkPreview,
  DashboardBulkResult,
  DashboardClients,
  DashboardNames,
  DashboardQueues,
  DashboardRun,
  DashboardRuns,
  DashboardSchedules,
  DashboardThroughput,
  Wire,
} from '../src/dashboard/dashboard-api.interface.js';

/*
 * The API's answers as the page reads them: each is the server's type
 * (src/dashboard/dashboard-api.interface.ts, the one definition) as JSON
 * carries it, dates as ISO 8601 strings. Only names are given here.
 */

export type QueuesAnswer = Wire<DashboardQueues>;
export type Queue = QueuesAnswer['queues'][number];
export type RunsAnswer = Wire<DashboardRuns>;
export type RunSummary = RunsAnswer['runs'][number];
export type RunAnswer = Wire<DashboardRun>;
export type Step = RunAnswer['steps'][number];
export type Attempt = Step['attempts'][number];
export type SchedulesAnswer = Wire<DashboardSchedules>;
export type Schedule = SchedulesAnswer['schedules'][number];
export type NamesAnswer = Wire<DashboardNames>;
export type ClientsAnswer = Wire<DashboardClients>;
export type Client = ClientsAnswer['clients'][number];
export type ThroughputAnswer = Wire<DashboardThroughput>;
export type BulkPreview = Wire<DashboardBulkPreview>;
export type BulkResult = Wire<DashboardBulkResult>;
export type BulkAction = BulkPreview['action'];
export type ActionResult = Wire<DashboardActionResult>;
