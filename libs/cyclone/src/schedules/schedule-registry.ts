import { Injectable } from '@nestjs/common';
import { checkKnownKeys, checkName, toJson } from '../common/validate.js';
import { messages } from '../cyclone.messages.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { InvalidScheduleError } from '../errors/invalid-schedule.error.js';
import type { ScheduleOptions } from '../options/cyclone-module-options.interface.js';
import type { StepRegistry } from '../steps/step-registry.js';
import { CronSchedule, type ScheduleSpec } from './cron-schedule.js';

const MODULE_KEYS = ['name', 'cron', 'kind', 'input', 'timezone', 'catchUp'] as const;
const STEP_KEYS = ['cron', 'timezone', 'input', 'catchUp'] as const;

/**
 * The app's schedules: those of `@Step(kind, { schedule })`, named by their
 * kind, and the module's `schedules`. Compiled at startup, once every step is
 * registered; a bad expression, an unknown time zone or kind, or a duplicate
 * name fails the boot.
 */
@Injectable()
export class ScheduleRegistry {
  private readonly schedules = new Map<string, CronSchedule>();

  compileAll(steps: StepRegistry, moduleSchedules: ScheduleOptions[], maxPayloadBytes: number): void {
    const specs: ScheduleSpec[] = [];
    for (const step of steps.all()) {
      if (step.schedule === undefined) continue;
      const where = `@Step('${step.kind}') option "schedule"`;
      if (typeof step.schedule === 'string') {
        specs.push({ name: step.kind, kind: step.kind, cron: step.schedule });
      } else if (typeof step.schedule === 'object' && step.schedule !== null) {
        checkKnownKeys(where, step.schedule, STEP_KEYS);
        specs.push({ name: step.kind, kind: step.kind, ...step.schedule });
      } else {
        throw new InvalidScheduleError(step.kind, step.kind, step.schedule, 'the schedule must be a cron expression or { cron, timezone?, input?, catchUp? }');
      }
    }
    moduleSchedules.forEach((schedule, i) => {
      if (typeof schedule !== 'object' || schedule === null) {
        throw new InvalidOptionError(`Option "schedules[${i}]" must be an object such as { name, cron, kind }.`);
      }
      checkKnownKeys(`option "schedules[${i}]"`, schedule, MODULE_KEYS);
      checkName(schedule.name, `schedules[${i}].name`);
      checkName(schedule.kind, `schedules[${i}].kind`);
      if (!steps.find(schedule.kind)) {
        throw new InvalidScheduleError(schedule.name, schedule.kind, schedule.cron, 'no @Step handler is registered for that kind');
      }
      specs.push(schedule);
    });
    for (const spec of specs) {
      if (this.schedules.has(spec.name)) throw new InvalidScheduleError(spec.name, spec.kind, spec.cron, messages.duplicateSchedule());
      toJson(spec.input ?? null, `input of schedule "${spec.name}"`, maxPayloadBytes);
      this.schedules.set(spec.name, CronSchedule.compile(spec));
    }
  }

  all(): CronSchedule[] {
    return [...this.schedules.values()];
  }
}
