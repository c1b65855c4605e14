import { describe, expect, it } from '@jest/globals';
import { DAG_SIZES, layoutDag, type DagInput } from './dag-layout.js';

const overlaps = (a: { x: number; y: number }, b: { x: number; y: number }) =>
  Math.abs(a.x - b.x) < DAG_SIZES.nodeWidth && Math.abs(a.y - b.y) < DAG_SIZES.nodeHeight;

function check(input: DagInput[]) {
  const layout = layoutDag(input);
  const at = new Map(layout.nodes.map((n) => [n.id, n]));
  expect([...at.keys()].sort()).toEqual(input.map((n) => n.id).sort());
  for (const a of layout.nodes) {
    for (const b of layout.nodes) if (a !== b) expect(overlaps(a, b)).toBe(false);
    expect(a.x + DAG_SIZES.nodeWidth).toBeLessThanOrEqual(layout.width);
    expect(a.y + DAG_SIZES.nodeHeight).toBeLessThanOrEqual(layout.height);
  }
  return { layout, at };
}

describe('layoutDag', () => {
  it('puts every node right of its upstream nodes, on the layer of its longest path from a root', () => {
    // The onboarding workflow of the example app.
    const { layout, at } = check([
      { id: 'fetch', after: [] },
      { id: 'score', after: ['fetch'] },
      { id: 'approval', after: ['score'] },
      { id: 'cooldown', after: ['approval'] },
      { id: 'welcome', after: ['cooldown', 'score', 'approval'] },
    ]);
    expect(layout.nodes.map((n) => [n.id, n.layer])).toEqual([
      ['fetch', 0],
      ['score', 1],
      ['approval', 2],
      ['cooldown', 3],
      ['welcome', 4],
    ]);
    expect(layout.edges.map((e) => `${e.from}->${e.to}`)).toEqual([
      'fetch->score',
      'score->approval',
      'approval->cooldown',
      'cooldown->welcome',
      'score->welcome',
      'approval->welcome',
    ]);
    for (const edge of layout.edges) expect(at.get(edge.from)!.x).toBeLessThan(at.get(edge.to)!.x);
    expect(layout.edges[0].path).toMatch(/^M [\d.]+ [\d.]+ C /);
    // Edges that skip layers arc over the nodes between rather than pass behind them; the drawing makes room.
    const numbers = (from: string, to: string) =>
      layout.edges.find((e) => e.from === from && e.to === to)!.path.match(/-?[\d.]+/g)!.map(Number);
    const [, y1, , c1] = numbers('score', 'welcome');
    expect(c1).toBeLessThan(y1 - DAG_SIZES.nodeHeight);
    const [, y2, , c2] = numbers('approval', 'welcome');
    expect(c2).toBeGreaterThan(c1);
    expect(c2).toBeLessThan(y2 - DAG_SIZES.nodeHeight / 2);
    const [, y3, , c3] = numbers('fetch', 'score');
    expect(c3).toBe(y3);
    expect(Math.min(...layout.nodes.map((n) => n.y)) + DAG_SIZES.nodeHeight / 2 - 0.75 * (y1 - c1)).toBeGreaterThanOrEqual(DAG_SIZES.padding);
  });

  it('stacks parallel nodes in one layer and orders them to avoid crossings', () => {
    const { at } = check([
      { id: 'a', after: [] },
      { id: 'b', after: [] },
      { id: 'from_b', after: ['b'] },
      { id: 'from_a', after: ['a'] },
      { id: 'join', after: ['from_a', 'from_b'] },
    ]);
    expect(at.get('a')!.layer).toBe(0);
    expect(at.get('b')!.layer).toBe(0);
    expect(at.get('join')!.layer).toBe(2);
    // from_a follows a and from_b follows b: the two edges do not cross.
    expect(Math.sign(at.get('from_a')!.y - at.get('from_b')!.y)).toBe(Math.sign(at.get('a')!.y - at.get('b')!.y));
  });

  it('draws a single node (a standalone job), and ignores unknown or repeated upstream ids', () => {
    expect(check([{ id: 'send_email', after: [] }]).layout).toMatchObject({ nodes: [{ layer: 0, row: 0 }], edges: [] });
    const { layout } = check([
      { id: 'x', after: ['missing', 'x'] },
      { id: 'y', after: ['x', 'x'] },
    ]);
    expect(layout.edges).toHaveLength(1);
  });

  it('still places every node of a cycle (a graph the engine refuses) rather than dropping it', () => {
    check([
      { id: 'root', after: [] },
      { id: 'p', after: ['root', 'q'] },
      { id: 'q', after: ['p'] },
    ]);
  });

  it('lays out a wide graph without overlaps', () => {
    const input: DagInput[] = [{ id: 'start', after: [] }];
    for (let i = 0; i < 30; i++) input.push({ id: `n${i}`, after: [i % 3 === 0 ? 'start' : `n${i - 1}`] });
    input.push({ id: 'end', after: input.slice(1).map((n) => n.id) });
    const { at } = check(input);
    expect(at.get('end')!.layer).toBe(Math.max(...[...at.values()].filter((n) => n.id !== 'end').map((n) => n.layer)) + 1);
  });
});
