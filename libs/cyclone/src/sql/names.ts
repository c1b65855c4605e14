/**
 * The names the database and the code share: states, node types, error
 * kinds and NOTIFY channels. The schema's CHECK constraints list the same
 * states (a test compares them), and the SQL functions send on these channels.
 */

export const RUN_STATES = ['running', 'paused', 'completed', 'failed', 'cancelled'] as const;
export type RunState = (typeof RUN_STATES)[number];
/** A finished run: nothing of it moves any more (unless it is retried). */
export const FINISHED_RUN_STATES: readonly RunState[] = ['completed', 'failed', 'cancelled'];

export const STEP_STATES = [
  'pending',
  'available',
  'running',
  'waiting_signal',
  'waiting_timer',
  'paused',
  'completed',
  'discarded',
  'cancelled',
] as const;
export type StepState = (typeof STEP_STATES)[number];

/**
 * What a node is: a DAG's step, signal wait or sleep; or, in a workflow
 * written as code, the method itself ('workflow') and its durable calls:
 * an inline call ('run', wf.run), a step (wf.step), a sleep, a signal wait, a
 * child run started ('child'), a wait for a child's result ('result') and a
 * patch's answer ('patch').
 */
export const NODE_TYPES = ['step', 'signal', 'sleep', 'workflow', 'run', 'child', 'result', 'patch'] as const;
export type NodeType = (typeof NODE_TYPES)[number];

export const ERROR_KINDS = ['error', 'timeout', 'permanent', 'reclaim_limit', 'signal_timeout', 'max_deliveries'] as const;
export type ErrorKind = (typeof ERROR_KINDS)[number];

/**
 * What ended an attempt of a step, in the words of the
 * `cyclone_steps_finished_total` metric's outcome label: it completed; it
 * failed and another attempt follows (retried) or none does (discarded: out
 * of attempts, a PermanentError, or reclaimed past maxReclaims); it ran past
 * its timeout (timed_out, whatever followed); its run was cancelled under it;
 * its worker stopped heartbeating and the sweep reclaimed it without
 * consuming the attempt; its handler snoozed; a code workflow's pass ended
 * waiting for its nodes (suspended). The database keeps the ended ones but
 * the completing one (cyclone_attempts: its CHECK lists the same).
 */
export const STEP_ATTEMPT_OUTCOMES = ['completed', 'retried', 'discarded', 'timed_out', 'cancelled', 'reclaimed', 'snoozed', 'suspended'] as const;
export type StepAttemptOutcome = (typeof STEP_ATTEMPT_OUTCOMES)[number];

/** NOTIFY channel that wakes the workers of a queue; the payload is the queue name. */
export const WAKE_CHANNEL = 'cyclone_wake';
/** NOTIFY channel that tells `result()` waiters a run has finished; the payload is the run id. */
export const RUN_FINISHED_CHANNEL = 'cyclone_run_finished';
/** NOTIFY channel that wakes the outbox publishers (broker dispatch); no payload. */
export const OUTBOX_CHANNEL = 'cyclone_outbox';
/** NOTIFY channel sent when a timer is set (a sleep, a signal wait's timeout); no payload. */
export const TIMER_CHANNEL = 'cyclone_timer';
/**
 * NOTIFY channel a claim sends when it left a free slot empty while another
 * client holds steps of the queue claimed ahead; the payload is the queue name.
 */
export const IDLE_CHANNEL = 'cyclone_idle';
export const CHANNELS = [WAKE_CHANNEL, RUN_FINISHED_CHANNEL, OUTBOX_CHANNEL, TIMER_CHANNEL, IDLE_CHANNEL] as const;
export type Channel = (typeof CHANNELS)[number];
