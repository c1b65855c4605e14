import { settings } from './settings.js';
import type {
  ActionResult,
  BulkAction,
  BulkPreview,
  BulkResult,
  ClientsAnswer,
  NamesAnswer,
  QueuesAnswer,
  RunAnswer,
  RunsAnswer,
  SchedulesAnswer,
  ThroughputAnswer,
} from './api-types.js';

/** An answer of the API other than 2xx, with the code and message it gave. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

async function call<T>(method: 'GET' | 'POST', path: string, params?: URLSearchParams): Promise<T> {
  const query = params && [...params.keys()].length > 0 ? `?${params}` : '';
  const headers: Record<string, string> = { accept: 'application/json' };
  if (method === 'POST') headers['x-cyclone-csrf'] = settings.csrfToken;
  let response: Response;
  try {
    response = await fetch(`${settings.base}/api${path}${query}`, { method, headers, credentials: 'same-origin' });
  } catch {
    throw new ApiError(0, 'unreachable', 'The server cannot be reached. It may be restarting; the page tries again.');
  }
  const body = (await response.json().catch(() => null)) as { code?: string; message?: unknown } | null;
  if (!response.ok) {
    const message = typeof body?.message === 'string' ? body.message : `The server answered ${response.status}.`;
    throw new ApiError(response.status, body?.code ?? String(response.status), message);
  }
  return body as T;
}

const run = (runId: string) => `/runs/${encodeURIComponent(runId)}`;
const queue = (name: string) => `/queues/${encodeURIComponent(name)}`;

export const api = {
  queues: () => call<QueuesAnswer>('GET', '/queues'),
  runs: (params: URLSearchParams) => call<RunsAnswer>('GET', '/runs', params),
  run: (runId: string) => call<RunAnswer>('GET', run(runId)),
  schedules: () => call<SchedulesAnswer>('GET', '/schedules'),
  cancel: (runId: string) => call<ActionResult>('POST', `${run(runId)}/cancel`),
  retryAll: (runId: string) => call<ActionResult>('POST', `${run(runId)}/retry`),
  retry: (runId: string, nodeId: string) =>
    call<ActionResult>('POST', `${run(runId)}/nodes/${encodeURIComponent(nodeId)}/retry`),
  pause: (runId: string) => call<ActionResult>('POST', `${run(runId)}/pause`),
  resume: (runId: string) => call<ActionResult>('POST', `${run(runId)}/resume`),
  pauseQueue: (name: string) => call<ActionResult>('POST', `${queue(name)}/pause`),
  resumeQueue: (name: string) => call<ActionResult>('POST', `${queue(name)}/resume`),
  throughput: (name: string) => call<ThroughputAnswer>('GET', `${queue(name)}/throughput`),
  names: () => call<NamesAnswer>('GET', '/names'),
  clients: () => call<ClientsAnswer>('GET', '/clients'),
  runNow: (runId: string, nodeId: string) =>
    call<ActionResult>('POST', `${run(runId)}/nodes/${encodeURIComponent(nodeId)}/run-now`),
  /** How many runs the action would act on, with the runs list's filters. */
  bulkPreview: (action: BulkAction, filters: URLSearchParams) => call<BulkPreview>('GET', `/bulk/${action}`, filters),
  /** Acts on the runs previewed: the same filters, the newest run shown and the count confirmed. */
  bulk: (action: BulkAction, filters: URLSearchParams, preview: BulkPreview) => {
    const params = new URLSearchParams(filters);
    if (preview.upTo !== null) params.set('upTo', preview.upTo);
    params.set('confirmed', String(preview.count));
    return call<BulkResult>('POST', `/bulk/${action}`, params);
  },
};
