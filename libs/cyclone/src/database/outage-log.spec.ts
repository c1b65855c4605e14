import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import type { Logger } from '@nestjs/common';
import { OutageLog } from './outage-log.js';

describe('OutageLog', () => {
  let lines: [string, string][];
  let log: OutageLog;

  beforeEach(() => {
    jest.useFakeTimers({ now: Date.UTC(2026, 0, 1) });
    lines = [];
    const logger = {
      warn: (message: string) => lines.push(['warn', message]),
      log: (message: string) => lines.push(['log', message]),
    } as unknown as Logger;
    log = new OutageLog('db.internal:5432/app', logger, 60_000);
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('says an outage began once, again at most once a minute with the failures in between, and that it ended once', () => {
    log.succeeded();
    expect(lines).toEqual([]);
    for (let i = 0; i < 50; i++) {
      log.failed('connect ECONNREFUSED');
      jest.advanceTimersByTime(1_000);
    }
    expect(log.isDown).toBe(true);
    expect(lines).toEqual([
      ['warn', expect.stringContaining('PostgreSQL at db.internal:5432/app cannot be reached (connect ECONNREFUSED)')],
    ]);
    for (let i = 0; i < 30; i++) {
      log.failed('connect ECONNREFUSED');
      jest.advanceTimersByTime(1_000);
    }
    expect(lines).toHaveLength(2);
    expect(lines[1]).toEqual(['warn', 'PostgreSQL at db.internal:5432/app is still unreachable after 60 s (60 calls failed since the last report; the latest: connect ECONNREFUSED).']);
    // A call under way since before the outage began ends nothing.
    log.succeeded(Date.UTC(2026, 0, 1) - 1);
    expect(log.isDown).toBe(true);
    log.succeeded();
    log.succeeded();
    expect(log.isDown).toBe(false);
    expect(lines.slice(2)).toEqual([['log', 'PostgreSQL at db.internal:5432/app answers again after 80 s; claiming and maintenance go on.']]);
    // The next outage is told of afresh.
    log.failed('Connection terminated unexpectedly');
    expect(lines[3]).toEqual(['warn', expect.stringContaining('cannot be reached (Connection terminated unexpectedly)')]);
  });
});
