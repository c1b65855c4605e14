import type { Step } from './api-types.js';

/** Calls recorded together, of the same type and kind, this many or more, are drawn as one group: a fan-out. */
export const FAN_OUT_MIN = 3;

/** An entry of a code workflow's call list: one node, or a fan-out of like nodes. */
export type CallItem = { node: Step } | { group: Step[] };

/**
 * A code workflow's nodes in the order its method made the calls (their
 * ids): its own node first, then each call; consecutive calls of one type
 * and kind written by the same statement (a Promise.all over a list) make
 * one group.
 */
export function callItems(steps: Step[]): CallItem[] {
  const items: CallItem[] = [];
  let run: Step[] = [];
  const flush = () => {
    if (run.length >= FAN_OUT_MIN) items.push({ group: run });
    else for (const node of run) items.push({ node });
    run = [];
  };
  for (const step of steps) {
    const last = run.at(-1);
    const alike = last && last.type === step.type && last.kind === step.kind && last.createdAt === step.createdAt;
    if (!alike) flush();
    if (step.type === 'workflow') items.push({ node: step });
    else run.push(step);
  }
  flush();
  return items;
}

/** How many nodes of a group are in each state, most advanced last. */
export function stateCounts(steps: Step[]): [string, number][] {
  const order = ['pending', 'available', 'running', 'waiting_signal', 'waiting_timer', 'paused', 'completed', 'discarded', 'cancelled'];
  const counts = new Map<string, number>();
  for (const step of steps) counts.set(step.state, (counts.get(step.state) ?? 0) + 1);
  return [...counts].sort((a, b) => order.indexOf(a[0]) - order.indexOf(b[0]));
}

/** The node of a group to show when the group is selected: a failed one, else a running one, else the first. */
export function groupPick(steps: Step[]): Step {
  return steps.find((s) => s.state === 'discarded') ?? steps.find((s) => s.state === 'running') ?? steps[0];
}
