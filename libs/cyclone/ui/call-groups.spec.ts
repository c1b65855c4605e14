import { describe, expect, it } from '@jest/globals';
import type { Step } from './api-types.js';
import { callItems, groupPick, stateCounts } from './call-groups.js';

let id = 0;
function step(nodeId: string, type: Step['type'], kind: string | null, createdAt: string, state = 'completed'): Step {
  id += 1;
  return { id: String(id), nodeId, type, kind, createdAt, state } as Step;
}

describe('callItems', () => {
  it('keeps the call order and groups a fan-out: like calls written by one statement', () => {
    const t1 = '2026-12-01T10:00:00.000Z';
    const t2 = '2026-12-01T10:00:01.000Z';
    const steps = [
      step('order', 'workflow', 'order', t1, 'running'),
      step('load', 'run', null, t1),
      ...Array.from({ length: 5 }, (_, i) => step(`ship-${i}`, 'step', 'ship', t2, i === 3 ? 'running' : 'completed')),
      // Two like steps are not a fan-out; another kind or another statement breaks a group.
      step('a', 'step', 'charge', t2),
      step('b', 'step', 'charge', t2),
      step('c', 'step', 'ship', '2026-12-01T10:00:02.000Z'),
    ];
    const items = callItems(steps);
    expect(items.map((item) => ('node' in item ? item.node.nodeId : item.group.map((s) => s.nodeId).join(',')))).toEqual([
      'order',
      'load',
      'ship-0,ship-1,ship-2,ship-3,ship-4',
      'a',
      'b',
      'c',
    ]);
    const group = (items[2] as { group: Step[] }).group;
    expect(stateCounts(group)).toEqual([
      ['running', 1],
      ['completed', 4],
    ]);
    expect(groupPick(group).nodeId).toBe('ship-3');
  });
});
