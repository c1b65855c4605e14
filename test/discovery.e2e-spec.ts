import { describe, it, expect, afterEach } from '@jest/globals';
import { Inject, Injectable, Module, Scope } from '@nestjs/common';
import {
  CycloneClient,
  CycloneError,
  DuplicateStepError,
  InvalidOptionError,
  InvalidStepHostError,
  Step,
  UnknownStepError,
  defineStep,
  type StepContext,
  type StepOptions,
} from 'cyclone-nestjs';
import { StepRegistry } from '../libs/cyclone/src/steps/step-registry.js';
import { CycloneTestEnv } from 'cyclone-nestjs/testing';

let env: CycloneTestEnv | undefined;

afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** Starts an environment that is expected to fail; returns the error it failed with. */
async function startupError(options: Parameters<typeof CycloneTestEnv.create>[0]): Promise<Error> {
  try {
    env = await CycloneTestEnv.create({ ...options, logger: false });
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the app to fail at startup');
}

describe('discovery of @Step handlers', () => {
  @Injectable()
  class GreetingSettings {
    readonly greeting = 'hello';
  }

  @Injectable()
  class ClassSteps {
    constructor(private readonly settings: GreetingSettings) {}

    @Step('greet')
    async greet(input: { name: string }) {
      return `${this.settings.greeting} ${input.name}`;
    }

    /** A plain method is not a handler. */
    helper() {
      return 'not a step';
    }
  }

  class ValueSteps {
    constructor(private readonly tag: string) {}

    @Step('from_value')
    async run(input: { n: number }) {
      return { tag: this.tag, n: input.n };
    }
  }

  class FactorySteps {
    constructor(private readonly settings: GreetingSettings) {}

    @Step('from_factory')
    async run(input: { name: string }, ctx: StepContext) {
      return { text: `${this.settings.greeting} from a factory, ${input.name}`, kind: ctx.kind };
    }
  }

  @Injectable()
  class FeatureSteps {
    @Step('in_feature_module')
    async run() {
      return 'feature';
    }
  }

  @Module({ providers: [FeatureSteps] })
  class FeatureModule {}

  it('finds handlers on class, useValue and useFactory providers and in imported modules, bound to their instance', async () => {
    env = await CycloneTestEnv.create({
      imports: [FeatureModule],
      providers: [
        GreetingSettings,
        ClassSteps,
        { provide: 'VALUE_STEPS', useValue: new ValueSteps('v1') },
        {
          provide: 'FACTORY_STEPS',
          useFactory: (settings: GreetingSettings) => new FactorySteps(settings),
          inject: [GreetingSettings],
        },
      ],
    });
    expect(env.app.get(StepRegistry).kinds().sort()).toEqual(
      ['from_factory', 'from_value', 'greet', 'in_feature_module'].sort(),
    );

    const greet = await env.client.enqueue('greet', { name: 'Ada' });
    const value = await env.client.enqueue('from_value', { n: 3 });
    const factory = await env.client.enqueue('from_factory', { name: 'Bo' });
    const feature = await env.client.enqueue('in_feature_module', null);
    await expect(env.client.result(greet, { timeout: 10_000 })).resolves.toBe('hello Ada');
    await expect(env.client.result(value, { timeout: 10_000 })).resolves.toEqual({ tag: 'v1', n: 3 });
    await expect(env.client.result(factory, { timeout: 10_000 })).resolves.toEqual({
      text: 'hello from a factory, Bo',
      kind: 'from_factory',
    });
    await expect(env.client.result(feature, { timeout: 10_000 })).resolves.toBe('feature');
  });

  it('rejects an enqueue of a kind nobody handles, naming the kind and the fix, and writes nothing', async () => {
    env = await CycloneTestEnv.create({ providers: [GreetingSettings, ClassSteps] });
    const err = await env.client.enqueue('no_such_kind', {}).catch((e: Error) => e);
    expect(err).toBeInstanceOf(UnknownStepError);
    expect((err as Error).message).toContain('"no_such_kind"');
    expect((err as Error).message).toContain("@Step('no_such_kind')");
    await expect(env.dataSource.query('SELECT count(*)::int AS n FROM cyclone_runs')).resolves.toEqual([{ n: 0 }]);
  });

  describe('fails at startup', () => {
    @Injectable()
    class BillingSteps {
      @Step('charge')
      async charge() {
        return 'billing';
      }
    }

    @Injectable()
    class PaymentSteps {
      @Step('charge')
      async chargeCard() {
        return 'payments';
      }
    }

    it('when two handlers claim the same kind, naming both', async () => {
      const err = await startupError({ providers: [BillingSteps, PaymentSteps] });
      expect(err).toBeInstanceOf(DuplicateStepError);
      expect((err as DuplicateStepError).code).toBe('duplicate_step');
      expect((err as DuplicateStepError).kind).toBe('charge');
      expect(err.message).toContain('BillingSteps.charge');
      expect(err.message).toContain('PaymentSteps.chargeCard');
      expect(err.message).toMatch(/rename/i);
    });

    it('when a useValue provider duplicates a class provider kind', async () => {
      const err = await startupError({
        providers: [BillingSteps, { provide: 'OTHER', useValue: new PaymentSteps() }],
      });
      expect(err).toBeInstanceOf(DuplicateStepError);
      expect(err.message).toContain('BillingSteps.charge');
      expect(err.message).toContain('PaymentSteps.chargeCard');
    });

    it('when a request-scoped provider declares a step', async () => {
      @Injectable({ scope: Scope.REQUEST })
      class PerRequestSteps {
        @Step('per_request')
        async run() {
          return 1;
        }
      }
      const err = await startupError({ providers: [PerRequestSteps] });
      expect(err).toBeInstanceOf(InvalidStepHostError);
      expect((err as CycloneError).code).toBe('invalid_step_host');
      expect(err.message).toContain('PerRequestSteps');
      expect(err.message).toContain("@Step('per_request')");
      expect(err.message).toMatch(/default-scoped|singleton/i);
    });

    it('when a step host depends on a request-scoped provider (so is request-scoped itself)', async () => {
      @Injectable({ scope: Scope.REQUEST })
      class RequestContext {}

      @Injectable()
      class ImplicitlyScopedSteps {
        constructor(@Inject(RequestContext) readonly context: RequestContext) {}

        @Step('implicitly_scoped')
        async run() {
          return 1;
        }
      }
      const err = await startupError({ providers: [RequestContext, ImplicitlyScopedSteps] });
      expect(err).toBeInstanceOf(InvalidStepHostError);
      expect(err.message).toContain('ImplicitlyScopedSteps');
      expect(err.message).toContain('implicitly_scoped');
    });

    it.each<[string, string, StepOptions, string]>([
      ['a negative timeout', 'neg_timeout', { timeout: -1 }, '"timeout"'],
      ['an unparsable timeout', 'bad_timeout', { timeout: 'soon' }, '"timeout"'],
      ['maxAttempts 0', 'zero_attempts', { maxAttempts: 0 }, '"maxAttempts"'],
      ['an unknown option key', 'unknown_key', { retries: 3 } as StepOptions, '"retries"'],
      ['a priority out of range', 'loud', { priority: 100_000 }, '"priority"'],
    ])('when @Step options have %s, naming the kind and the option', async (_label, kind, options, option) => {
      @Injectable()
      class BadSteps {
        @Step(kind, options)
        async run() {
          return 1;
        }
      }
      const err = await startupError({ providers: [BadSteps] });
      expect(err).toBeInstanceOf(InvalidOptionError);
      expect((err as CycloneError).code).toBe('invalid_option');
      expect(err.message).toContain(`@Step('${kind}')`);
      expect(err.message).toContain(option);
    });
  });
});

describe('typed step references', () => {
  interface ResizeInput {
    width: number;
    height: number;
  }
  interface ResizeOutput {
    area: number;
    attempt: number;
  }
  const Resize = defineStep<ResizeInput, ResizeOutput>('resize_image', { maxAttempts: 2, priority: 7 });

  @Injectable()
  class ImageSteps {
    @Step(Resize)
    async resize(input: ResizeInput, ctx: StepContext): Promise<ResizeOutput> {
      return { area: input.width * input.height, attempt: ctx.attempt };
    }
  }

  it('registers with @Step(ref), enqueues with the ref, returns typed output, and applies the ref options', async () => {
    env = await CycloneTestEnv.create({ providers: [ImageSteps] });
    expect(env.app.get(StepRegistry).kinds()).toEqual(['resize_image']);

    const runId = await env.client.enqueue(Resize, { width: 3, height: 4 });
    const output: ResizeOutput = await env.client.result<typeof Resize>(runId, { timeout: 10_000 });
    expect(output).toEqual({ area: 12, attempt: 1 });

    const [step] = await env.client.listSteps(runId);
    expect(step.kind).toBe('resize_image');
    expect(step.maxAttempts).toBe(2);
    const [{ priority }] = await env.dataSource.query('SELECT priority FROM cyclone_steps WHERE run_id = $1', [runId]);
    expect(priority).toBe(7);

    // The kind's name works as well as the ref.
    const byName = await env.client.enqueue('resize_image', { width: 2, height: 2 });
    await expect(env.client.result(byName, { timeout: 10_000 })).resolves.toEqual({ area: 4, attempt: 1 });
  });

  it('defineStep gives a frozen ref that carries the kind and its options', () => {
    expect(Resize).toEqual({ kind: 'resize_image', options: { maxAttempts: 2, priority: 7 } });
    expect(Object.isFrozen(Resize)).toBe(true);
    expect(Object.isFrozen(Resize.options)).toBe(true);
  });

  // Never called: these lines only have to type-check (`npx tsc --noEmit -p tsconfig.json`);
  // each @ts-expect-error fails the compile if the ref stops checking types.
  void async function compileTimeChecks(client: CycloneClient): Promise<number> {
    // @ts-expect-error width must be a number
    await client.enqueue(Resize, { width: '3', height: 4 });
    // @ts-expect-error height is missing
    await client.enqueue(Resize, { width: 3 });
    const out = await client.result<typeof Resize>('id');
    // @ts-expect-error the output has no "volume"
    void out.volume;
    return out.area;
  };
});
