import { describe, expect, it } from 'vitest';
import { DeviceCountCache } from '#core/devices/device-count-cache';

/** A count the test finishes by hand, and how many were started. */
function manualCounts() {
  const started: Array<(value: { total: number; quota: number }) => void> = [];
  return {
    started,
    count: () => new Promise<{ total: number; quota: number }>((resolve) => started.push(resolve)),
  };
}

describe('DeviceCountCache', () => {
  it('lets requests that miss together share one count', async () => {
    const cache = new DeviceCountCache();
    const counts = manualCounts();
    const answers = Array.from({ length: 16 }, () => cache.load('account', 'status=offline', counts.count));
    expect(counts.started).toHaveLength(1);
    counts.started[0]!({ total: 47_000, quota: 100_000 });
    expect(await Promise.all(answers)).toEqual(Array(16).fill({ total: 47_000, quota: 100_000 }));
  });

  it('counts each account and filter on its own', async () => {
    const cache = new DeviceCountCache();
    const counts = manualCounts();
    const answers = [
      cache.load('a', 'status=offline', counts.count),
      cache.load('a', 'status=online', counts.count),
      cache.load('b', 'status=offline', counts.count),
    ];
    expect(counts.started).toHaveLength(3);
    counts.started.forEach((resolve, i) => resolve({ total: i, quota: 10 }));
    expect((await Promise.all(answers)).map((a) => a.total)).toEqual([0, 1, 2]);
  });

  it('answers from the entry until it expires, then counts again', async () => {
    let now = 0;
    const cache = new DeviceCountCache({ ttlMs: 1000, now: () => now });
    let total = 0;
    const count = () => Promise.resolve({ total: ++total, quota: 10 });
    expect((await cache.load('a', 'f', count)).total).toBe(1);
    now = 999;
    expect((await cache.load('a', 'f', count)).total).toBe(1);
    now = 1000;
    expect((await cache.load('a', 'f', count)).total).toBe(2);
  });

  it('counts again after the account changed, even while an older count is under way', async () => {
    const cache = new DeviceCountCache();
    const counts = manualCounts();
    const before = cache.load('a', 'f', counts.count);
    cache.invalidate('a');
    const after = cache.load('a', 'f', counts.count);
    expect(counts.started).toHaveLength(2);
    // The newer count finishes first: the older one, finishing after it, must not replace it.
    counts.started[1]!({ total: 6, quota: 10 });
    expect((await after).total).toBe(6);
    counts.started[0]!({ total: 5, quota: 10 });
    expect((await before).total).toBe(5);
    // The stale count was not kept for later requests.
    expect((await cache.load('a', 'f', counts.count)).total).toBe(6);
  });

  it('does not keep a failed count: the next request counts again', async () => {
    const cache = new DeviceCountCache();
    await expect(cache.load('a', 'f', () => Promise.reject(new Error('connection lost')))).rejects.toThrow(
      'connection lost',
    );
    expect((await cache.load('a', 'f', () => Promise.resolve({ total: 3, quota: 10 }))).total).toBe(3);
  });
});
