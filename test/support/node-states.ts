import type { CycloneTestEnv } from 'cyclone-nestjs/testing';
import { waitFor } from './wait.js';

/** Each node of a run and its state, as `listSteps` reports them. */
export async function stateOf(env: CycloneTestEnv, runId: string): Promise<Record<string, string>> {
  const steps = await env.client.listSteps(runId);
  return Object.fromEntries(steps.map((s) => [s.nodeId, s.state]));
}

/** Waits until the named nodes of a run are in the given states, and returns every node's state. */
export function untilStates(env: CycloneTestEnv, runId: string, want: Record<string, string>, what: string) {
  return waitFor(
    what,
    async () => {
      const states = await stateOf(env, runId);
      return Object.entries(want).every(([id, state]) => states[id] === state) ? states : undefined;
    },
    10_000,
  );
}
