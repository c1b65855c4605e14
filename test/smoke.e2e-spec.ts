import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Step, type StepContext } from '../libs/cyclone/src/index.js';
import { CycloneTestEnv } from '../libs/cyclone/src/testing/index.js';

@Injectable()
class Steps {
  @Step('double')
  async double(input: { n: number }, ctx: StepContext) {
    return { n: input.n * 2, attempt: ctx.attempt };
  }
}

describe('smoke', () => {
  let env: CycloneTestEnv;
  beforeAll(async () => {
    env = await CycloneTestEnv.create({ providers: [Steps], logger: ['error', 'warn', 'log'] });
  });
  afterAll(async () => env?.close());

  it('runs a job', async () => {
    const runId = await env.client.enqueue('double', { n: 21 });
    await expect(env.client.result(runId, { timeout: 10_000 })).resolves.toEqual({ n: 42, attempt: 1 });
  });
});
