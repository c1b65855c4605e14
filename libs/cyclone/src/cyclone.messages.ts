/** Why a running step's signal aborted (StepAbortedError's reason). */
type AbortReason = 'timeout' | 'cancelled' | 'lease_lost' | 'shutdown';

/** Every user-facing message in one place, so wording stays consistent. */
export const messages = {
  unknownStep: (kind: string) =>
    `No handler is registered for step kind "${kind}". ` +
    `Decorate a method of a provider with @Step('${kind}') and list that provider in a module the app imports.`,
  duplicateStep: (kind: string, first: string, second: string) =>
    `Step kind "${kind}" is registered twice: by ${first} and by ${second}. ` +
    `Each kind needs exactly one handler; rename one of them.`,
  requestScopedHost: (host: string, declaration: string) =>
    `${host} declares ${declaration} but is request-scoped (or depends on a request-scoped provider). ` +
    `Workers run outside any request: make ${host} a default-scoped provider.`,
  unknownStepEvent: (host: string, event: unknown, events: readonly string[]) =>
    `${host} has @OnStepEvent(${typeof event === 'string' ? `'${event}'` : String(event)}), which is not a step event. ` +
    `Use one of: ${events.join(', ')}.`,
  listenerForUnknownKind: (host: string, event: string, kind: string) =>
    `${host} listens with @OnStepEvent('${event}', '${kind}'), but no @Step('${kind}') is registered in this app: ` +
    'events fire in the process that ran the step (or whose sweep settled it), so it may never be called. Check the kind.',
  stepEventListenerFailed: (host: string, event: string, nodeId: string, runId: string, reason: string) =>
    `The @OnStepEvent('${event}') listener ${host} failed for step ${nodeId} of run ${runId}: ${reason}. ` +
    'The step is not affected.',
  invalidMetricsPrefix: (prefix: unknown) =>
    `Option "prefix" of CycloneMetricsModule must be a Prometheus metric name prefix (letters, digits, _ and :, ` +
    `not starting with a digit), such as 'cyclone_'; got ${describe(prefix)}.`,
  metricsOptionsNotObject: (value: unknown) =>
    `CycloneMetricsModule.forRoot() takes an options object such as { prefix: 'cyclone_' }; got ${describe(value)}.`,
  metricsSampleInterval: (minMs: number, ms: number) =>
    `Option "sampleInterval" of CycloneMetricsModule must be at least ${minMs} ms; got ${ms} ms.`,
  invalidRegistry: (value: unknown) =>
    `Option "registry" of CycloneMetricsModule must be a prom-client Registry (new Registry() from prom-client); got ${describe(value)}.`,
  metricRegisteredTwice: (name: string) =>
    `The Prometheus registry already has a metric named ${name}: another app in this process, or a second ` +
    'CycloneMetricsModule.forRoot(), registered it. Give each app its own registry (forRoot({ registry: new Registry() })) ' +
    'or another prefix.',
  duplicate: (key: string, runId: string) =>
    `A run with unique key "${key}" is already active (run ${runId}). ` +
    `Wait for it to finish, or catch DuplicateError and use its runId.`,
  runNotFound: (runId: string) =>
    `Run ${runId} does not exist. It may never have been enqueued, or it finished and its retention has expired: ` +
    'a job with retention 0 is deleted as it completes, unless a caller was already waiting for its result.',
  stepNotFound: (runId: string, nodeId: string) => `Run ${runId} has no node "${nodeId}".`,
  queueNotFound: (queue: string) =>
    `Queue ${describe(queue)} does not exist: no client serves it, no step or workflow names it, and no run is on it. ` +
    'Check the name; a queue exists once a client that serves it, or defines a step on it, has started.',
  runFailed: (runId: string, steps: { nodeId: string; error: string | null; errorKind: string | null }[]) =>
    `Run ${runId} failed: ` +
    steps.map((s) => `${s.nodeId} discarded (${s.errorKind ?? 'error'}: ${s.error ?? 'no message'})`).join('; '),
  runCancelled: (runId: string) => `Run ${runId} was cancelled.`,
  passesTimedOut: (loop: string, queue: string | undefined, seen: number, wanted: number, ms: number) =>
    `${loop}${queue === undefined ? '' : ` of queue "${queue}"`} ended ${seen} of ${wanted} pass${wanted === 1 ? '' : 'es'} in ${ms} ms. ` +
    'A pass that failed (the database unreachable) does not count; give a longer timeout on a busy machine.',
  attemptEndTimedOut: (what: string, ms: number) =>
    `No attempt of ${what} ended in this environment within ${ms} ms. ` +
    "Its handler may still be running (release it), or another client's worker ran it: ask that environment.",
  loopNotRunning: (loop: string, why: string) => `${loop} does not run in this environment: ${why}.`,
  unknownLoop: (loop: unknown, loops: readonly string[]) => `${describe(loop)} is not a loop of Cyclone's; the loops are ${loops.join(', ')}.`,
  resultTimeout: (runId: string, state: string, ms: number) =>
    `Run ${runId} did not finish within ${ms} ms (it is still ${state}). The run goes on; call result() again to keep waiting.`,
  stepAborted: (reason: AbortReason, runId: string, nodeId: string) => {
    const why: Record<AbortReason, string> = {
      timeout: 'its timeout elapsed',
      cancelled: 'its run was cancelled',
      lease_lost: 'this worker lost its lease (another worker may run it)',
      shutdown: 'the worker is shutting down; the step is handed back',
    };
    return `Step ${nodeId} of run ${runId} was aborted: ${why[reason]}.`;
  },
  unstorableError: (reason: string) =>
    `The handler failed, but its error could not be stored (PostgreSQL refused it: ${reason}); see the worker's log for the error itself.`,
  notInTransaction: () =>
    'enqueueTx needs an open transaction: pass the EntityManager given by dataSource.transaction(...) ' +
    'or a QueryRunner after startTransaction(). Use enqueue() for a job outside a transaction.',
  transactionAborted: () =>
    'The transaction given to enqueueTx has already failed (a statement before this one raised an error), ' +
    'so nothing more can run in it. Roll it back, and enqueue in a new transaction.',
  transactionGone: () =>
    'The transaction given to enqueueTx is over: its query runner has been released (by the app, or by TypeORM ' +
    'when its connection to the database was lost). Nothing was written; enqueue in a new transaction.',
  invalidDuration: (name: string, value: unknown) =>
    `Option "${name}" must be a non-negative number of milliseconds or a string such as '500ms', '30s', '5m', '2h' or '1d'; got ${describe(value)}.`,
  zeroDuration: (name: string) =>
    `Option "${name}" must be greater than zero; leave it unset for no limit.`,
  durationTooLong: (name: string, value: unknown, maxMs: number) =>
    `Option "${name}" must be at most ${maxMs} ms (100 years); got ${describe(value)}.`,
  invalidInteger: (name: string, value: unknown, min: number, max: number) =>
    `Option "${name}" must be an integer from ${min} to ${max}; got ${describe(value)}.`,
  invalidString: (name: string, value: unknown) =>
    `Option "${name}" must be a non-empty string of at most 200 characters; got ${describe(value)}.`,
  invalidBoolean: (name: string, value: unknown) => `Option "${name}" must be true or false; got ${describe(value)}.`,
  unstorableName: (name: string, value: string, problem: string) =>
    `Option "${name}" must be text PostgreSQL can store; ${describe(value)} contains ${problem}.`,
  invalidDate: (name: string, value: unknown) => `Option "${name}" must be a valid Date; got ${describe(value)}.`,
  dateOutOfRange: (name: string, value: Date) =>
    `Option "${name}" must be a Date PostgreSQL can hold (from 4714-11-24 BC onwards); got ${describe(value)}.`,
  notAnOptionsObject: (where: string, value: unknown) =>
    `The ${where} must be an object (or left out); got ${describe(value)}.`,
  unreadableOption: (where: string, key: string, reason: string) =>
    `Reading option "${key}" of the ${where} threw: ${reason}.`,
  conflictingOptions: (a: string, b: string) => `Options "${a}" and "${b}" cannot be used together; pick one.`,
  unknownOption: (where: string, name: string, known: readonly string[]) =>
    `Unknown option "${name}" in ${where}. Known options: ${known.join(', ')}.`,
  tooDeep: (path: string, limit: number) =>
    `${path} is nested more than ${limit} levels deep, which PostgreSQL's JSON parser may refuse; flatten it`,
  notSerialisable: (what: string, reason: string) =>
    `The ${what} is not JSON-serialisable (${reason}). Pass plain objects, arrays, strings, numbers, booleans or null.`,
  /** `atLeast`: the value was measured only until it passed the limit. */
  tooLarge: (what: string, bytes: number, limit: number, atLeast = false) =>
    `The ${what} is ${atLeast ? 'at least ' : ''}${bytes} bytes of JSON, over the limit of ${limit} bytes (module option maxPayloadBytes). ` +
    'Store large data elsewhere and pass a reference.',
  invalidWorkflow: (workflow: string, nodeId: string | null, problem: string) =>
    `Workflow "${workflow}"${nodeId === null ? '' : `, node "${nodeId}"`}: ${problem}`,
  unknownWorkflow: (workflow: string) =>
    `No workflow named "${workflow}" is registered. Decorate a provider method with @Workflow('${workflow}'), ` +
    `or define it with defineWorkflow('${workflow}').step(...) and list it in CycloneModule.forRoot({ workflows: [...] }).`,
  workflowNamesake: (workflow: string) =>
    `The workflow passed to start() is not the one registered as "${workflow}"; another definition has that name. ` +
    'Pass the registered definition (export it from one module), or start it by name.',
  workflowNameTaken: (name: string, host: string, holder: string) =>
    `@Workflow('${name}') on ${host}: that name is already ${holder}. A workflow's name is the kind its runs are claimed ` +
    'by and the name runs are listed under, so it must differ from every step kind and other workflow: rename one of them.',
  workflowNameRequired: (host: string, name: unknown) =>
    `@Workflow on ${host} must name the workflow with a string or a defineWorkflow() reference; got ${describe(name)}.`,
  nonDeterminism: (workflow: string, runId: string, nodeId: string, recorded: string, called: string) =>
    `Workflow "${workflow}" (run ${runId}) called ${called} "${nodeId}", but the run recorded "${nodeId}" as ${recorded}. ` +
    'A workflow must make the same durable calls, under the same names, each time it runs: move what reads a clock, ' +
    "draws a random value or does I/O into wf.run, and guard a changed path with wf.patched('<id>'). " +
    'The run has failed; fix the code, then retry the run.',
  duplicateNode: (workflow: string, runId: string, nodeId: string) =>
    `Workflow "${workflow}" (run ${runId}) used the name "${nodeId}" for two durable calls. Each wf.* call is a node ` +
    'named by its first argument, once in a run: give each call its own name (in a loop, add the index, as `ship-${i}`).',
  nodeLimit: (workflow: string, runId: string, maxNodes: number) =>
    `Workflow "${workflow}" (run ${runId}) would record more than ${maxNodes} nodes (its maxNodes option). ` +
    `Raise maxNodes in @Workflow('${workflow}', { maxNodes }), or split the work over child runs (wf.startChild).`,
  stepFailed: (runId: string, nodeId: string, errorKind: string, error: string | null) =>
    `Node "${nodeId}" of run ${runId} failed (${errorKind}: ${error ?? 'no message'}).`,
  codeRetryRefused: (runId: string, nodeId: string) =>
    `Node "${nodeId}" of run ${runId} is discarded, but the run is a workflow written as code that has not failed: ` +
    'its method has already dealt with that failure, and its replays must see it again. A code workflow is retried ' +
    'once it has failed (retry any of its discarded nodes, or retryAll).',
  notAChild: (runId: string, child: string) =>
    `wf.result(${describe(child)}) in run ${runId}: that is not a run this run started. wf.result waits for a run id ` +
    'that wf.startChild returned in the same run.',
  unknownChildTarget: (target: string) =>
    `wf.startChild: no workflow and no step kind is named "${target}" in this app. Pass a defineWorkflow() or ` +
    'defineStep() reference, or the name of a @Workflow, a workflow of CycloneModule.forRoot({ workflows }) or a @Step.',
  nonDurableWait: (workflow: string, runId: string) =>
    `Workflow "${workflow}" (run ${runId}) is waiting on something that is not a durable call: its method has made no ` +
    'wf.* call it could wait for, so it cannot be suspended and holds its worker. Wrap timers and I/O in wf.run ' +
    '(or use wf.sleep).',
  newerVersionRuns: (workflow: string, count: number, version: number, mine: number) =>
    `${count} run(s) of workflow "${workflow}" were started by version ${version}, newer than this client's ` +
    `${mine}; they wait for a client that runs version ${version} or later.`,
  unknownSignal: (runId: string, signal: string) =>
    `Run ${runId} has no node "${signal}" waiting for a signal. Signal names are the node ids of its waitForSignal nodes.`,
  notWaitingToRun: (runId: string, nodeId: string, state: string) =>
    `Node "${nodeId}" of run ${runId} is ${state}; only a step waiting to run (delayed, backing off after a failure, ` +
    'or snoozed) can be run now.',
  signalRefused: (runId: string, signal: string, why: string) => `Signal "${signal}" to run ${runId} was refused: ${why}.`,
  schemaMissing: (missing: number[]) =>
    `Cyclone's schema is not up to date: migrations ${missing.join(', ')} have not been applied. ` +
    'Apply them with `npx cyclone migrate` (or migrationsRun: true, or CYCLONE_MIGRATIONS in your DataSource), ' +
    'or print their SQL with `npx cyclone migrate --dry-run`.',
  schemaFromOtherVersion: (versions: number[]) =>
    `The database records Cyclone migrations that this version of cyclone-nestjs does not ship (${versions.join(', ')}): ` +
    'another version migrated it. Run the version that did, or, for a development database, drop the cyclone_* tables and start again.',
  missingDependency: (packageName: string, feature: string) =>
    `${feature} needs the package ${packageName}, which is not installed. Install it with \`npm install ${packageName}\`.`,
  embeddedPortInUse: (port: number) =>
    `The embedded PostgreSQL cannot listen on port ${port}: another process holds it (a second app, another ` +
    'PostgreSQL, or a server left behind by a crash). Stop that process, or choose another port with CYCLONE_EMBEDDED_PORT, ' +
    'or give Cyclone a database with CYCLONE_DATABASE_URL.',
  embeddedDirInUse: (dir: string, pid: number, port: string | undefined, app: number | null) =>
    `The embedded PostgreSQL's data directory ${dir} is in use by a running server (pid ${pid}` +
    `${port ? `, port ${port}` : ''}) ` +
    (app !== null
      ? `of another app that is still running (pid ${app}). Stop that app, `
      : `that Cyclone did not start. Stop it with \`kill -INT ${pid}\` (a plain kill waits for its clients to leave), `) +
    'or use another directory with CYCLONE_EMBEDDED_DIR.',
  embeddedOrphanStopping: (dir: string, pid: number, port: string | undefined, app: number) =>
    `The embedded PostgreSQL of ${dir} (pid ${pid}${port ? `, port ${port}` : ''}) outlived the app that started it ` +
    `(pid ${app}, which is gone: killed or crashed). Stopping it (a fast shutdown) before starting the server again.`,
  embeddedOrphanStuck: (dir: string, pid: number) =>
    `The embedded PostgreSQL of ${dir} (pid ${pid}), left running by an app that is gone, did not stop when asked. ` +
    `Stop it with \`kill -9 ${pid}\`, then start again.`,
  embeddedReady: (url: string) =>
    `Embedded PostgreSQL ready at ${url} (its fixed development login, not a secret). ` +
    `Point the CLI or psql at it: \`npx cyclone status --url ${url}\`, \`psql ${url}\`.`,
  importedTwice: (importers: string[]) =>
    `CycloneModule.forRoot() is imported more than once${importers.length > 0 ? ` (by ${importers.join(', ')})` : ''}. ` +
    'The import that started first runs the workers and maintenance loops with its options; the others only provide ' +
    'a CycloneClient. Import CycloneModule.forRoot() once, in the root module: it is global, so every module can inject CycloneClient.',
  noShutdownHooks: () =>
    'This app runs Cyclone workers but no shutdown hooks are enabled: on SIGTERM the process ends at once and its ' +
    "running steps are re-run only after their lease expires. Call app.enableShutdownHooks() so they finish or are handed back.",
  warmFailed: (reason: string) =>
    `Could not warm the pool's connections at startup: ${reason}. Nothing is affected but speed: the first call ` +
    "of each Cyclone statement on a connection plans it, 15–20 ms more than the next.",
  warmSkipped: () =>
    "The database's Cyclone schema is older than this client (its migration has not run): the pool's connections " +
    'are not warmed at startup.',
  dashboardUnguarded: (path: string) =>
    `CycloneDashboardModule at ${path} has no guard, so anyone who reaches the app could read every job's input and ` +
    'cancel or retry runs. Pass guard: YourAuthGuard (a CanActivate class), or allowUnauthenticated: true for a ' +
    'dashboard that only trusted users can reach (local development, a private network).',
  dashboardOption: (name: string, expected: string, value: unknown) =>
    `Option "${name}" of CycloneDashboardModule ${expected}; got ${describe(value)}.`,
  dashboardAssetsMissing: (looked: string[]) =>
    `The dashboard's front end is missing (no main.js in ${looked.join(' or ')}). ` +
    'Reinstall cyclone-nestjs; in its repository, build it with `npm run build`.',
  bulkCountChanged: (confirmed: number, found: number) =>
    `${found} runs match now, more than the ${confirmed} you confirmed; nothing was done. ` +
    'Look at the list again and confirm the new count.',
  csrfRejected: (reason: string) =>
    `The dashboard refused this action: ${reason}. Actions are accepted only from the dashboard's own page; reload it and try again.`,
  invalidParameter: (name: string, value: unknown, expected: string) =>
    `Parameter "${name}" ${expected}; got ${describe(value)}.`,
  repeatedParameter: (name: string) => `Parameter "${name}" is given more than once; give it once.`,
  unknownParameter: (name: string, known: readonly string[]) =>
    `Unknown parameter "${name.slice(0, 100)}". Known parameters: ${known.length > 0 ? known.join(', ') : 'none'}.`,
  databaseUnavailable: (where: string, reason: string) =>
    `PostgreSQL at ${where} could not serve the call: ${reason}. Nothing was written; try again once the database is back.`,
  databaseDown: (where: string, reason: string) =>
    `PostgreSQL at ${where} cannot be reached (${reason}): claiming and maintenance pause and calls fail with ` +
    'DatabaseUnavailableError until it answers; Cyclone keeps trying by itself and says here when it is back.',
  databaseStillDown: (where: string, ms: number, failures: number, reason: string) =>
    `PostgreSQL at ${where} is still unreachable after ${Math.round(ms / 1_000)} s ` +
    `(${failures} call${failures === 1 ? '' : 's'} failed since the last report; the latest: ${reason}).`,
  databaseBack: (where: string, ms: number) =>
    `PostgreSQL at ${where} answers again after ${Math.round(ms / 1_000)} s; claiming and maintenance go on.`,
  databaseUnreachablePublic: (reason: string | undefined) => `the database could not be reached${reason ? ` (${reason})` : ''}`,
  databaseUnavailablePublic: () => 'The database could not serve the request, so nothing was written. Try again shortly.',
  outcomeUnknownPublic: (runIds: readonly string[]) =>
    'The connection to the database was lost while the request was being committed, so it may or may not have taken effect. ' +
    (runIds.length === 0 ? 'It is safe to repeat.' : 'Look up the runs in runIds before repeating it.'),
  statementTimedOut: (where: string, ms: number | null) =>
    `PostgreSQL at ${where} did not finish the statement within ${ms === null ? 'its statement_timeout' : `${ms} ms (module option statementTimeout)`}. ` +
    'Nothing was written; try again, and look for long transactions holding locks on the cyclone_* tables.',
  outcomeUnknown: (where: string, reason: string, runIds: readonly string[]) =>
    `The connection to PostgreSQL at ${where} was lost while the call was committing (${reason}), so it may or may not have taken effect. ` +
    (runIds.length === 0
      ? 'The call is safe to repeat.'
      : `Look up ${runIds.length === 1 ? `run ${runIds[0]}` : `runs ${runIds.join(', ')}`} with getRun() before repeating it: ` +
        'an enqueue or start that did commit would otherwise run twice.'),
  schemaUnusable: (reason: string) =>
    `Cyclone's tables or functions are missing or out of date (${reason}). ` +
    'Apply the migrations with `npx cyclone migrate` (or migrationsRun: true).',
  connectRetrying: (where: string, source: string, reason: string, attempt: number, attempts: number, delayMs: number) =>
    `Cannot connect to PostgreSQL at ${where} (URL from ${source}): ${reason}; ` +
    `attempt ${attempt} of ${attempts}, retrying in ${delayMs} ms`,
  connectFailed: (where: string, source: string, reason: string, attempts: number, delayMs: number) =>
    `Cyclone could not connect to PostgreSQL at ${where} (URL from ${source}): ${reason}. ` +
    `Gave up after ${attempts} attempt${attempts === 1 ? '' : 's'}${attempts > 1 ? ` ${delayMs} ms apart` : ''} (module option connectRetry). ` +
    'Check that the server is running and reachable at that address, and that the URL is the one you meant.',
  migrationWaiting: (name: string, attempt: number) =>
    `Cyclone migration ${name} let go of its locks to let running statements through (try ${attempt}): ` +
    'a transaction holds the cyclone_* tables; trying again in a moment',
  migrationLocked: (name: string, attempts: number) =>
    `Cyclone migration ${name} could not take the locks it needs in ${attempts} tries: a long transaction holds the cyclone_* tables. ` +
    'Find it in pg_stat_activity (state "idle in transaction" or a long query), end it, and migrate again.',
  invalidKey: (kind: string, option: string, problem: string) =>
    `The ${option} function of step "${kind}" ${problem}. A key function must return a string for every input ` +
    'it is given; the enqueue wrote nothing.',
  invalidSchedule: (name: string, kind: string, cron: unknown, problem: string) =>
    `Schedule "${name}" of step "${kind}" (cron ${describe(cron)}): ${problem}. Use 5 fields (minute hour day-of-month month day-of-week), ` +
    "or 6 with seconds first, such as '0 3 * * *' or '*/10 * * * * *', and an IANA time zone such as 'Europe/Berlin'.",
  duplicateSchedule: () => 'another schedule has this name (a @Step schedule is named by its kind); give each schedule its own name',
  replaceStarted: (key: string, runId: string) =>
    `A run with unique key "${key}" has already started (run ${runId}), so its input cannot be replaced. ` +
    'Wait for it to finish, or catch DuplicateError and use its runId.',
  embeddedFailed: (step: string, output: string) =>
    `The embedded PostgreSQL failed to ${step}${output ? `. The server said: ${output}` : ' and said nothing.'}`,
};

const describe = (value: unknown) => describeValue(value);

/** Longest part of a string value quoted in a message. */
const QUOTED_CHARS = 80;

/**
 * A short description of any value for a message, safe for hostile ones:
 * it never calls the value's own code (toString, getters, proxy traps) in a
 * way that can throw out of here, so building the message for a bad argument
 * cannot itself fail.
 */
export function describeValue(value: unknown): string {
  try {
    switch (typeof value) {
      case 'string':
        return value.length <= QUOTED_CHARS
          ? JSON.stringify(value)
          : `${JSON.stringify(value.slice(0, QUOTED_CHARS))}… (${value.length} characters)`;
      case 'number':
      case 'boolean':
      case 'undefined':
        return String(value);
      case 'bigint':
        return `${value}n`;
      case 'symbol':
        return describeValue(Symbol.prototype.toString.call(value)).replace(/^"|"$/g, '');
      case 'function':
        return 'a function';
      default:
        return describeObject(value as object | null);
    }
  } catch {
    return 'a value that cannot be described';
  }
}

function describeObject(value: object | null): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array`;
  if (value instanceof Date) {
    const time = Date.prototype.getTime.call(value);
    return Number.isNaN(time) ? 'an invalid Date' : `Date(${Date.prototype.toISOString.call(value)})`;
  }
  const proto = Object.getPrototypeOf(value) as object | null;
  if (proto === null) return 'an object without a prototype';
  if (proto === Object.prototype) return 'an object';
  const name = (Object.getOwnPropertyDescriptor(proto, 'constructor')?.value as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && /^[\w$]{1,60}$/.test(name) ? `a ${name}` : 'an object';
}
