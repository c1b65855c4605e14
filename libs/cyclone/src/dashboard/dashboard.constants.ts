/** The dashboard's resolved options (ResolvedDashboardOptions). */
export const DASHBOARD_OPTIONS = Symbol('CYCLONE_DASHBOARD_OPTIONS');

export const DEFAULT_DASHBOARD_PATH = '/cyclone';

/** The cookie that holds the CSRF token, and the header an action must echo it in. */
export const CSRF_COOKIE = 'cyclone_csrf';
export const CSRF_HEADER = 'x-cyclone-csrf';

/** Runs a page of the runs list holds, by default and at most. */
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;

/**
 * Throughput is read from the latest finished steps of a queue within this
 * window, at most THROUGHPUT_SAMPLE of them.
 */
export const THROUGHPUT_WINDOW_SECONDS = 300;
export const THROUGHPUT_SAMPLE = 1_000;

/** A queue's chart reads at most this many of each minute's latest finished steps (QUEUE_THROUGHPUT). */
export const THROUGHPUT_MINUTE_SAMPLE = 100;

/** The most runs one bulk action acts on: more, and the operator narrows the filters. */
export const BULK_LIMIT = 1_000;

/** The most names a picker offers. */
export const PICKER_LIMIT = 500;
