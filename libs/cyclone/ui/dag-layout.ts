/*
 * Where each node of a run's graph goes: a layered drawing, upstream nodes
 * to the left. Plain data in, plain data out (no DOM), so it is tested on
 * its own. A workflow has tens of nodes, not thousands: a longest-path
 * layering and a few barycenter sweeps draw it legibly without a library.
 */

export interface DagInput {
  id: string;
  /** Upstream node ids; ids that are not nodes of the graph are ignored. */
  after: readonly string[];
}

export interface PlacedNode {
  id: string;
  layer: number;
  /** Position within the layer, from the top. */
  row: number;
  x: number;
  y: number;
}

export interface PlacedEdge {
  from: string;
  to: string;
  /** An SVG path from the right side of `from` to the left side of `to`. */
  path: string;
}

export interface DagLayout {
  nodes: PlacedNode[];
  edges: PlacedEdge[];
  width: number;
  height: number;
}

export interface DagSizes {
  nodeWidth: number;
  nodeHeight: number;
  gapX: number;
  gapY: number;
  padding: number;
}

export const DAG_SIZES: DagSizes = { nodeWidth: 168, nodeHeight: 48, gapX: 56, gapY: 18, padding: 12 };

export function layoutDag(input: readonly DagInput[], sizes: DagSizes = DAG_SIZES): DagLayout {
  const ids = new Set(input.map((n) => n.id));
  const upstream = new Map(input.map((n) => [n.id, [...new Set(n.after)].filter((id) => ids.has(id) && id !== n.id)]));
  const layer = layers(input, upstream);

  const byLayer: string[][] = [];
  for (const node of input) (byLayer[layer.get(node.id)!] ??= []).push(node.id);
  for (let i = 0; i < byLayer.length; i++) byLayer[i] ??= [];

  // Barycenter sweeps: a node moves towards the mean row of its upstream
  // nodes, then of its downstream ones, which removes most crossings.
  const downstream = new Map<string, string[]>([...ids].map((id) => [id, []]));
  for (const [id, ups] of upstream) for (const up of ups) downstream.get(up)!.push(id);
  const rowOf = new Map<string, number>();
  const index = () => byLayer.forEach((ids) => ids.forEach((id, row) => rowOf.set(id, row)));
  index();
  for (let sweep = 0; sweep < 4; sweep++) {
    const neighbours = sweep % 2 === 0 ? upstream : downstream;
    const order = sweep % 2 === 0 ? byLayer.keys() : [...byLayer.keys()].reverse();
    for (const l of order) {
      const weight = (id: string) => {
        const near = neighbours.get(id)!;
        return near.length === 0 ? rowOf.get(id)! : near.reduce((sum, n) => sum + rowOf.get(n)!, 0) / near.length;
      };
      const weights = new Map(byLayer[l].map((id) => [id, weight(id)]));
      byLayer[l].sort((a, b) => weights.get(a)! - weights.get(b)! || rowOf.get(a)! - rowOf.get(b)!);
      byLayer[l].forEach((id, row) => rowOf.set(id, row));
    }
  }

  const tallest = Math.max(1, ...byLayer.map((ids) => ids.length));
  const stepY = sizes.nodeHeight + sizes.gapY;
  const nodes: PlacedNode[] = [];
  byLayer.forEach((ids, l) => {
    // Each layer is centred against the tallest one.
    const offset = ((tallest - ids.length) * stepY) / 2;
    ids.forEach((id, row) =>
      nodes.push({
        id,
        layer: l,
        row,
        x: sizes.padding + l * (sizes.nodeWidth + sizes.gapX),
        y: sizes.padding + offset + row * stepY,
      }),
    );
  });
  const at = new Map(nodes.map((n) => [n.id, n]));
  // An edge that skips layers would pass behind the nodes between; it arcs
  // over them instead, higher the more layers it skips.
  const liftOf = (span: number) => (span <= 1 ? 0 : sizes.nodeHeight + sizes.gapY * (span - 1));
  let overhang = 0;
  for (const node of input) {
    for (const up of upstream.get(node.id)!) {
      const lift = liftOf(at.get(node.id)!.layer - at.get(up)!.layer);
      const top = Math.min(at.get(up)!.y, at.get(node.id)!.y) + sizes.nodeHeight / 2 - lift * 0.75;
      overhang = Math.max(overhang, sizes.padding - top);
    }
  }
  for (const node of nodes) node.y += overhang;
  const edges: PlacedEdge[] = [];
  for (const node of input) {
    for (const up of upstream.get(node.id)!) {
      const a = at.get(up)!;
      const b = at.get(node.id)!;
      const x1 = a.x + sizes.nodeWidth;
      const y1 = a.y + sizes.nodeHeight / 2;
      const x2 = b.x;
      const y2 = b.y + sizes.nodeHeight / 2;
      const lift = liftOf(b.layer - a.layer);
      const bend = Math.max(24, lift > 0 ? sizes.gapX : (x2 - x1) / 2);
      edges.push({
        from: up,
        to: node.id,
        path: `M ${x1} ${y1} C ${x1 + bend} ${y1 - lift}, ${x2 - bend} ${y2 - lift}, ${x2} ${y2}`,
      });
    }
  }
  return {
    nodes,
    edges,
    width: sizes.padding * 2 + byLayer.length * sizes.nodeWidth + Math.max(0, byLayer.length - 1) * sizes.gapX,
    height: overhang + sizes.padding * 2 + tallest * sizes.nodeHeight + (tallest - 1) * sizes.gapY,
  };
}

/**
 * Each node's layer: the length of the longest path to it from a root, so
 * every edge points right. Nodes on a cycle (a graph Cyclone would have
 * refused) are put after everything else rather than lost.
 */
function layers(input: readonly DagInput[], upstream: Map<string, string[]>): Map<string, number> {
  const layer = new Map<string, number>();
  const waiting = new Map(input.map((n) => [n.id, upstream.get(n.id)!.length]));
  const downstream = new Map<string, string[]>(input.map((n) => [n.id, []]));
  for (const [id, ups] of upstream) for (const up of ups) downstream.get(up)!.push(id);
  const ready = input.filter((n) => waiting.get(n.id) === 0).map((n) => n.id);
  for (const id of ready) layer.set(id, 0);
  while (ready.length > 0) {
    const id = ready.shift()!;
    for (const next of downstream.get(id)!) {
      layer.set(next, Math.max(layer.get(next) ?? 0, layer.get(id)! + 1));
      waiting.set(next, waiting.get(next)! - 1);
      if (waiting.get(next) === 0) ready.push(next);
    }
  }
  const deepest = Math.max(-1, ...layer.values());
  for (const node of input) if (!layer.has(node.id) || waiting.get(node.id)! > 0) layer.set(node.id, deepest + 1);
  return layer;
}
