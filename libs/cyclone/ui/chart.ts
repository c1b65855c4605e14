import type { ThroughputAnswer } from './api-types.js';
import { s } from './dom.js';
import { time } from './format.js';

const WIDTH = 720;
const HEIGHT = 180;
const PAD = { left: 44, right: 8, top: 10, bottom: 22 };

/**
 * A queue's last hour as SVG bars, one a minute: completed steps stacked on
 * failed ones, with the scale's top on the left and the hour's ends below.
 * Each bar's title says its minute and counts (estimated for a busy minute).
 */
export function throughputChart(answer: ThroughputAnswer): SVGSVGElement {
  const minutes = answer.minutes;
  const top = niceCeiling(Math.max(1, ...minutes.map((m) => m.completed + m.failed)));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(minutes.length, 1);
  const y = (value: number) => PAD.top + plotH - (value / top) * plotH;
  return s(
    'svg',
    {
      class: 'chart throughput',
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
      width: WIDTH,
      height: HEIGHT,
      role: 'img',
      'aria-label': `Steps finished per minute on queue ${answer.queue} over the last hour`,
    },
    s('line', { class: 'axis', x1: PAD.left, x2: WIDTH - PAD.right, y1: y(0), y2: y(0) }),
    s('line', { class: 'grid-line', x1: PAD.left, x2: WIDTH - PAD.right, y1: y(top), y2: y(top) }),
    s('text', { class: 'tick', x: PAD.left - 6, y: y(top) + 4, 'text-anchor': 'end' }, String(top)),
    s('text', { class: 'tick', x: PAD.left - 6, y: y(0) + 4, 'text-anchor': 'end' }, '0'),
    minutes.map((minute, i) => {
      const x = PAD.left + i * slot + 1;
      const w = Math.max(slot - 2, 1);
      const label = `${time(minute.at)}: ${minute.completed} completed, ${minute.failed} failed${minute.estimated ? ' (estimated)' : ''}`;
      return s(
        'g',
        { class: 'minute', 'data-at': minute.at, 'data-completed': minute.completed, 'data-failed': minute.failed },
        s('title', null, label),
        minute.failed > 0 ? s('rect', { class: 'bar failed', x, width: w, y: y(minute.failed), height: y(0) - y(minute.failed) }) : null,
        minute.completed > 0
          ? s('rect', {
              class: 'bar completed',
              x,
              width: w,
              y: y(minute.failed + minute.completed),
              height: y(minute.failed) - y(minute.failed + minute.completed),
            })
          : null,
      );
    }),
    minutes.length > 0 ? s('text', { class: 'tick', x: PAD.left, y: HEIGHT - 6 }, time(minutes[0].at).slice(11, 16)) : null,
    minutes.length > 0
      ? s('text', { class: 'tick', x: WIDTH - PAD.right, y: HEIGHT - 6, 'text-anchor': 'end' }, time(minutes.at(-1)!.at).slice(11, 16))
      : null,
  );
}

/** The scale's top: 1, 2 or 5 times a power of ten, at or above the highest bar. */
function niceCeiling(value: number): number {
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}
