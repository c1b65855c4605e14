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
  requestScopedHost: (host: string, kind: string) =>
    `${host} declares @Step('${kind}') but is request-scoped (or depends on a request-scoped provider). ` +
    `Workers run outside any request: make ${host} a default-scoped provider.`,
  duplicate: (key: string, runId: string) =>
    `A run with unique key "${key}" is already active (run ${runId}). ` +
    `Wait for it to finish, or catch DuplicateError and use its runId.`,
  runNotFound: (runId: string) =>
    `Run ${runId} does not exist. It may never have been enqueued, or its retention has expired.`,
  stepNotFound: (runId: string, nodeId: string) => `Run ${runId} has no node "${nodeId}".`,
  runFailed: (runId: string, steps: { nodeId: string; error: string | null; errorKind: string | null }[]) =>
    `Run ${runId} failed: ` +
    steps.map((s) => `${s.nodeId} discarded (${s.errorKind ?? 'error'}: ${s.error ?? 'no message'})`).join('; '),
  runCancelled: (runId: string) => `Run ${runId} was cancelled.`,
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
  notInTransaction: () =>
    'enqueueTx needs an open transaction: pass the EntityManager given by dataSource.transaction(...) ' +
    'or a QueryRunner after startTransaction(). Use enqueue() for a job outside a transaction.',
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
  invalidDate: (name: string, value: unknown) => `Option "${name}" must be a valid Date; got ${describe(value)}.`,
  conflictingOptions: (a: string, b: string) => `Options "${a}" and "${b}" cannot be used together; pick one.`,
  unknownOption: (where: string, name: string, known: readonly string[]) =>
    `Unknown option "${name}" in ${where}. Known options: ${known.join(', ')}.`,
  notSerialisable: (what: string, reason: string) =>
    `The ${what} is not JSON-serialisable (${reason}). Pass plain objects, arrays, strings, numbers, booleans or null.`,
  tooLarge: (what: string, bytes: number, limit: number) =>
    `The ${what} is ${bytes} bytes of JSON, over the limit of ${limit} bytes (module option maxPayloadBytes). ` +
    'Store large data elsewhere and pass a reference.',
  invalidWorkflow: (workflow: string, nodeId: string | null, problem: string) =>
    `Workflow "${workflow}"${nodeId === null ? '' : `, node "${nodeId}"`}: ${problem}`,
  unknownWorkflow: (workflow: string) =>
    `No workflow named "${workflow}" is registered. ` +
    `Define it with defineWorkflow('${workflow}') and list it in CycloneModule.forRoot({ workflows: [...] }).`,
  workflowNamesake: (workflow: string) =>
    `The workflow passed to start() is not the one registered as "${workflow}"; another definition has that name. ` +
    'Pass the registered definition (export it from one module), or start it by name.',
  unknownSignal: (runId: string, signal: string) =>
    `Run ${runId} has no node "${signal}" waiting for a signal. Signal names are the node ids of its waitForSignal nodes.`,
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
  embeddedDirInUse: (dir: string, pid: number, port: string | undefined) =>
    `The embedded PostgreSQL's data directory ${dir} is in use by a running server (pid ${pid}` +
    `${port ? `, port ${port}` : ''}): another app is using it, or a server was left behind by a crash. Stop it with \`kill ${pid}\`, ` +
    'or use another directory with CYCLONE_EMBEDDED_DIR.',
  importedTwice: (importers: string[]) =>
    `CycloneModule.forRoot() is imported more than once${importers.length > 0 ? ` (by ${importers.join(', ')})` : ''}. ` +
    'The import that started first runs the workers and maintenance loops with its options; the others only provide ' +
    'a CycloneClient. Import CycloneModule.forRoot() once, in the root module: it is global, so every module can inject CycloneClient.',
  noShutdownHooks: () =>
    'This app runs Cyclone workers but no shutdown hooks are enabled: on SIGTERM the process ends at once and its ' +
    "running steps are re-run only after their lease expires. Call app.enableShutdownHooks() so they finish or are handed back.",
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

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value instanceof Date) return `Date(${String(value)})`;
  return String(value);
}
