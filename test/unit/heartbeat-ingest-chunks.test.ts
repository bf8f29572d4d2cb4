import { describe, expect, it } from 'vitest';
import { ManualClock } from '#core/shared/clock';
import { createLogger } from '#core/logger';
import { HeartbeatIngest, MAX_FLUSH_ROWS } from '#core/devices/heartbeat-ingest';
import type { PresenceRow } from '#core/devices/presence-changes';
import type { PresenceService } from '#core/devices/presence.service';

/**
 * A flush after a fleet reconnected at once is written in statements of at most MAX_FLUSH_ROWS
 * devices, every device exactly once; a statement that fails leaves only its own devices pending
 * (the others are not written again, so nothing counted on them is counted twice).
 */
describe('heartbeat flushes of many devices', () => {
  const devices = MAX_FLUSH_ROWS * 2 + 500;
  const setup = (failOnCall?: number) => {
    const statements: PresenceRow[][] = [];
    const presence = {
      applyBatch: (rows: PresenceRow[]) => {
        if (statements.length + 1 === failOnCall) {
          statements.push([]);
          return Promise.reject(new Error('database down'));
        }
        statements.push([...rows]);
        return Promise.resolve([]);
      },
    } as unknown as PresenceService;
    const ingest = new HeartbeatIngest({
      presence,
      clock: new ManualClock(new Date()),
      logger: createLogger('silent'),
    });
    for (let i = 0; i < devices; i++) ingest.heartbeat(`device-${i}`, { uptime_s: i });
    return { ingest, statements };
  };

  it('writes every device once, in statements of at most MAX_FLUSH_ROWS', async () => {
    const { ingest, statements } = setup();
    await ingest.flush();
    expect(statements.map((rows) => rows.length)).toEqual([MAX_FLUSH_ROWS, MAX_FLUSH_ROWS, 500]);
    expect(new Set(statements.flat().map((r) => r.deviceId)).size).toBe(devices);
    expect(ingest.backlog).toBe(0);
  });

  it('keeps only the devices of a failed statement pending, and writes them with the next flush', async () => {
    const { ingest, statements } = setup(2);
    await ingest.flush();
    expect(ingest.backlog).toBe(MAX_FLUSH_ROWS);
    await ingest.flush();
    expect(ingest.backlog).toBe(0);
    const written = statements.flat().map((r) => r.deviceId);
    expect(written).toHaveLength(devices);
    expect(new Set(written).size).toBe(devices);
  });
});
