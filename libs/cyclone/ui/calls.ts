import type { Step } from './api-types.js';
import { callItems, groupPick, stateCounts } from './call-groups.js';
import { h } from './dom.js';
import { stateBadge } from './format.js';

const CALL_NAMES: Record<string, string> = {
  workflow: 'method',
  run: 'wf.run',
  step: 'wf.step',
  sleep: 'wf.sleep',
  signal: 'wf.waitForSignal',
  child: 'wf.startChild',
  result: 'wf.result',
  patch: 'wf.patched',
};

/**
 * The list of a code workflow's calls: each a button that selects it,
 * coloured by its state; a fan-out as one entry with its count and how many
 * of it are in each state.
 */
export function drawCalls(steps: Step[], selected: string | null, onSelect: (nodeId: string) => void): HTMLElement {
  return h(
    'ol',
    { class: 'calls', 'aria-label': `Calls of the workflow, in the order made (${steps.length} nodes)` },
    callItems(steps).map((item) => {
      if ('node' in item) {
        const step = item.node;
        return h(
          'li',
          { class: `call state-${step.state}${step.nodeId === selected ? ' selected' : ''}`, 'data-node-id': step.nodeId, 'data-state': step.state },
          h(
            'button',
            { type: 'button', onclick: () => onSelect(step.nodeId) },
            h('code', { class: 'call-name' }, step.nodeId),
            h('span', { class: 'call-type' }, CALL_NAMES[step.type] ?? step.type, step.kind !== null && step.type !== 'workflow' ? ` · ${step.kind}` : ''),
            stateBadge(step.state),
          ),
        );
      }
      const group = item.group;
      const first = group[0];
      const contains = group.some((s) => s.nodeId === selected);
      return h(
        'li',
        { class: `call call-group${contains ? ' selected' : ''}`, 'data-group-of': first.nodeId, 'data-count': group.length },
        h(
          'button',
          { type: 'button', onclick: () => onSelect(groupPick(group).nodeId) },
          h('code', { class: 'call-name' }, `${first.nodeId} … ${group[group.length - 1].nodeId}`),
          h('span', { class: 'call-type' }, `${group.length} × ${CALL_NAMES[first.type] ?? first.type}${first.kind !== null ? ` · ${first.kind}` : ''}`),
          h(
            'span',
            { class: 'call-counts' },
            stateCounts(group).map(([state, n]) => h('span', { class: `badge state-${state}`, 'data-state': state }, `${n} ${state.replace('_', ' ')}`)),
          ),
        ),
      );
    }),
  );
}
