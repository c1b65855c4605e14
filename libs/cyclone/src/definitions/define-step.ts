import type { StepOptions } from '../interfaces/step-options.interface.js';

/**
 * A typed reference to a step kind. Declared once, it is both what `@Step`
 * registers and what `enqueue` and `result` take, so input and output types
 * are checked at compile time.
 */
export interface StepRef<I = unknown, O = unknown> {
  readonly kind: string;
  readonly options: StepOptions;
  /** Type carriers only; never set at run time. */
  readonly __input?: I;
  readonly __output?: O;
}

export type StepInput<S> = S extends StepRef<infer I, unknown> ? I : unknown;
export type StepOutput<S> = S extends StepRef<unknown, infer O> ? O : unknown;

export function defineStep<I = unknown, O = unknown>(kind: string, options: StepOptions = {}): StepRef<I, O> {
  return Object.freeze({ kind, options: Object.freeze({ ...options }) });
}
