import { unstorableText } from '../common/storable-text.js';
import { messages } from '../cyclone.messages.js';
import { InvalidParameterError } from '../errors/invalid-parameter.error.js';
import { RUN_STATES, type RunState } from '../sql/names.js';
import type { BulkAction } from './dashboard-api.interface.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './dashboard.constants.js';

/*
 * Every parameter the dashboard's API accepts is checked here, before any
 * query runs: a bad one is an InvalidParameterError (400) that names it, so
 * nothing malformed ever reaches the database.
 */

/** The query string as the HTTP adapter parsed it: strings, arrays for repeated names. */
export type QueryParams = Record<string, unknown>;

/** The runs list's filters: the runs page's form, and what a bulk action acts on. */
export interface RunFilters {
  state: RunState | null;
  /** A standalone job's step kind or a workflow's name. */
  kind: string | null;
  queue: string | null;
  /** Created at or after, at or before (to the millisecond). */
  from: Date | null;
  to: Date | null;
  /** A run id or a unique key. */
  search: string | null;
}

export interface RunsQuery extends RunFilters {
  /** Keyset cursors: a page of runs older than `before`, or newer than `after`. */
  before: string | null;
  after: string | null;
  limit: number;
}

/** A bulk action, as confirmed: the filters, the newest run shown, and how many runs the operator agreed to. */
export interface BulkQuery extends RunFilters {
  upTo: string | null;
  confirmed: number;
}

const FILTER_PARAMETERS = ['state', 'kind', 'queue', 'from', 'to', 'q'] as const;
export const RUNS_PARAMETERS = [...FILTER_PARAMETERS, 'before', 'after', 'limit'] as const;
const BULK_PARAMETERS = [...FILTER_PARAMETERS, 'upTo', 'confirmed'] as const;
const BULK_ACTIONS: readonly BulkAction[] = ['retry', 'cancel'];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})?)?$/;
/** Dates a UUIDv7 can hold and a person means: from the Unix epoch to the year 9999. */
const MAX_TIME = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
const MAX_NAME = 200;

export function parseRunsQuery(query: QueryParams): RunsQuery {
  checkOnly(query, RUNS_PARAMETERS);
  const filters = runFilters(query);
  const before = runIdParam(query, 'before');
  const after = runIdParam(query, 'after');
  if (before !== null && after !== null) throw invalid('after', after, 'cannot be combined with "before"; page one way at a time');
  const limitText = text(query, 'limit');
  let limit = DEFAULT_PAGE_SIZE;
  if (limitText !== null) {
    limit = /^\d{1,4}$/.test(limitText) ? Number(limitText) : NaN;
    if (!(limit >= 1 && limit <= MAX_PAGE_SIZE)) throw invalid('limit', limitText, `must be a whole number from 1 to ${MAX_PAGE_SIZE}`);
  }
  return { ...filters, before, after, limit };
}

/** The filters of a bulk action's preview (a GET): the runs list's, without paging. */
export function parseBulkPreview(query: QueryParams): RunFilters {
  checkOnly(query, FILTER_PARAMETERS);
  return runFilters(query);
}

/** A bulk action as confirmed (a POST): the filters, `upTo` (the newest run shown) and `confirmed` (how many). */
export function parseBulkQuery(query: QueryParams, limit: number): BulkQuery {
  checkOnly(query, BULK_PARAMETERS);
  const filters = runFilters(query);
  const confirmedText = text(query, 'confirmed');
  const confirmed = confirmedText !== null && /^\d{1,7}$/.test(confirmedText) ? Number(confirmedText) : NaN;
  if (!(confirmed >= 0 && confirmed <= limit)) {
    throw invalid('confirmed', confirmedText, `must be the number of runs confirmed, from 0 to ${limit}`);
  }
  return { ...filters, upTo: runIdParam(query, 'upTo'), confirmed };
}

/** The action of a bulk action's path. */
export function parseBulkAction(value: unknown): BulkAction {
  if (!BULK_ACTIONS.includes(value as BulkAction)) throw invalid('action', value, `must be one of ${BULK_ACTIONS.join(', ')}`);
  return value as BulkAction;
}

function runFilters(query: QueryParams): RunFilters {
  const state = text(query, 'state');
  if (state !== null && !(RUN_STATES as readonly string[]).includes(state)) {
    throw invalid('state', state, `must be one of ${RUN_STATES.join(', ')}`);
  }
  const from = time(query, 'from');
  const to = time(query, 'to');
  if (from && to && from.getTime() > to.getTime()) throw invalid('from', query.from, 'must not be later than "to"');
  return {
    state: state as RunState | null,
    kind: name(query, 'kind'),
    queue: name(query, 'queue'),
    from,
    to,
    search: name(query, 'q'),
  };
}

/** For routes that take no query parameters. */
export function parseNoQuery(query: QueryParams): void {
  checkOnly(query, []);
}

/** A run id in a path. */
export function parseRunId(value: unknown, parameter = 'runId'): string {
  if (typeof value !== 'string' || !UUID.test(value)) throw invalid(parameter, value, 'must be a run id (a UUID)');
  return value.toLowerCase();
}

/**
 * A node id, a queue name, a kind or a search text. PostgreSQL's text cannot
 * hold a NUL, and turns half of a character into U+FFFD: neither can match
 * a stored name, and a NUL would reach the server as an error.
 */
export function parseName(value: unknown, parameter: string): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > MAX_NAME) {
    throw invalid(parameter, value, `must be a non-empty string of at most ${MAX_NAME} characters`);
  }
  const problem = unstorableText(value);
  if (problem) throw invalid(parameter, value, `must not contain ${problem}`);
  return value;
}

/** Whether a search text is a run id. */
export function isRunId(value: string): boolean {
  return UUID.test(value);
}

function checkOnly(query: QueryParams, known: readonly string[]): void {
  for (const key of Object.keys(query ?? {})) {
    if (!known.includes(key)) throw new InvalidParameterError(key.slice(0, 100), messages.unknownParameter(key, known));
  }
}

/** A parameter given at most once, as text; empty is the same as absent (an empty form field). */
function text(query: QueryParams, parameter: string): string | null {
  const value = query[parameter];
  if (value === undefined || value === '') return null;
  if (Array.isArray(value)) throw new InvalidParameterError(parameter, messages.repeatedParameter(parameter));
  if (typeof value !== 'string') throw invalid(parameter, value, 'must be text');
  return value;
}

function name(query: QueryParams, parameter: string): string | null {
  const value = text(query, parameter);
  return value === null ? null : parseName(value, parameter);
}

function runIdParam(query: QueryParams, parameter: string): string | null {
  const value = text(query, parameter);
  return value === null ? null : parseRunId(value, parameter);
}

function time(query: QueryParams, parameter: string): Date | null {
  const value = text(query, parameter);
  if (value === null) return null;
  const ms = ISO_TIME.test(value) ? Date.parse(value) : NaN;
  if (!(ms >= 0 && ms <= MAX_TIME)) {
    throw invalid(parameter, value, 'must be an ISO 8601 date or time from 1970 to 9999, such as 2026-11-30T08:00:00Z');
  }
  return new Date(ms);
}

function invalid(parameter: string, value: unknown, expected: string): InvalidParameterError {
  return new InvalidParameterError(parameter, messages.invalidParameter(parameter, value, expected));
}
