import type { Runner, SystemName } from './types.js';

/** The runner of one system, loaded only when the run includes it. */
export async function loadRunner(system: SystemName): Promise<Runner> {
  if (system === 'cyclone') return (await import('./cyclone.js')).runner;
  if (system === 'cyclone-observed') return (await import('./cyclone.js')).observedRunner;
  if (system === 'cyclone-redis') return (await import('./cyclone.js')).dispatchedRunner;
  if (system === 'pg-boss-batch') {
    const pgBoss: { batchRunner: Runner } = await import(new URL('../peers/pg-boss.js', import.meta.url).href);
    return pgBoss.batchRunner;
  }
  // The peers' runners live in their own package (bench/peers), compiled by tsconfig.bench.json
  // only: a computed specifier keeps the root type check from following the import.
  const peer: { runner: Runner } = await import(new URL(`../peers/${system}.js`, import.meta.url).href);
  return peer.runner;
}
