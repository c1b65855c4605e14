import { Injectable } from '@nestjs/common';
import { DuplicateStepError } from '../errors/duplicate-step.error.js';
import { UnknownStepError } from '../errors/unknown-step.error.js';
import type { RegisteredStep } from './registered-step.js';
import { describeValue } from '../cyclone.messages.js';

/** The step kinds this client can run, filled by the explorer at startup. */
@Injectable()
export class StepRegistry {
  private readonly steps = new Map<string, RegisteredStep>();

  register(step: RegisteredStep): void {
    const existing = this.steps.get(step.kind);
    if (existing) throw new DuplicateStepError(step.kind, existing.host, step.host);
    this.steps.set(step.kind, step);
  }

  /** The step of a kind; UnknownStepError for anything else (also a value that is not a kind at all). */
  get(kind: unknown): RegisteredStep {
    const step = typeof kind === 'string' ? this.steps.get(kind) : undefined;
    if (!step) throw new UnknownStepError(typeof kind === 'string' ? kind : describeValue(kind));
    return step;
  }

  find(kind: string): RegisteredStep | undefined {
    return this.steps.get(kind);
  }

  kinds(): string[] {
    return [...this.steps.keys()];
  }

  all(): RegisteredStep[] {
    return [...this.steps.values()];
  }
}
