import type { Step } from './api-types.js';
import { DAG_SIZES, layoutDag } from './dag-layout.js';
import { s } from './dom.js';
import { shownState } from './format.js';

/** Characters of a label that fit in a node; the whole text is in its tooltip. */
const LABEL_CHARS = 22;

const clip = (text: string) => (text.length > LABEL_CHARS ? `${text.slice(0, LABEL_CHARS - 1)}…` : text);

/**
 * A run's graph as SVG: a box a node, coloured by its state, with arrows
 * from upstream nodes. Clicking a node (or Enter on it) selects it.
 */
export function drawDag(steps: Step[], selected: string | null, onSelect: (nodeId: string) => void): SVGSVGElement {
  const layout = layoutDag(steps.map((step) => ({ id: step.nodeId, after: step.after })));
  const byId = new Map(steps.map((step) => [step.nodeId, step]));
  const { nodeWidth: w, nodeHeight: hgt } = DAG_SIZES;
  const svg = s(
    'svg',
    {
      class: 'dag',
      viewBox: `0 0 ${layout.width} ${layout.height}`,
      width: layout.width,
      height: layout.height,
      role: 'group',
      'aria-label': `Graph of ${steps.length} node${steps.length === 1 ? '' : 's'}`,
    },
    s(
      'defs',
      null,
      s(
        'marker',
        { id: 'dag-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
        s('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrow' }),
      ),
    ),
    layout.edges.map((edge) =>
      s('path', {
        class: `edge state-${byId.get(edge.from)!.state}`,
        d: edge.path,
        'marker-end': 'url(#dag-arrow)',
        'data-from': edge.from,
        'data-to': edge.to,
      }),
    ),
    layout.nodes.map((node) => {
      const step = byId.get(node.id)!;
      const state = shownState(step);
      const detail = step.type === 'step' ? (step.kind ?? '') : step.type === 'signal' ? 'signal' : 'sleep';
      const select = () => onSelect(step.nodeId);
      return s(
        'g',
        {
          class: `node state-${state}${step.nodeId === selected ? ' selected' : ''}`,
          transform: `translate(${node.x} ${node.y})`,
          'data-node-id': step.nodeId,
          'data-state': state,
          tabindex: 0,
          role: 'button',
          'aria-label': `${step.nodeId}: ${state}`,
          onclick: select,
          onkeydown: (event: Event) => {
            if ((event as KeyboardEvent).key === 'Enter' || (event as KeyboardEvent).key === ' ') select();
          },
        },
        s('title', null, `${step.nodeId}${detail ? ` (${detail})` : ''}: ${state}`),
        s('rect', { width: w, height: hgt, rx: 6 }),
        s('text', { x: 10, y: 19, class: 'node-id' }, clip(step.nodeId)),
        s('text', { x: 10, y: 37, class: 'node-detail' }, clip(`${state.replace('_', ' ')}${detail && detail !== step.nodeId ? ` · ${detail}` : ''}`)),
      );
    }),
  );
  return svg;
}
