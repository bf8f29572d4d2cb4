import { describe, it, expect } from 'vitest';
import { RefusedPublishGuard } from '#broker/flood-guard';
import { REFUSED_PUBLISH_LIMIT, REFUSED_PUBLISH_WINDOW_S } from '#protocol/payloads';

/** Refused publishes close a connection only beyond REFUSED_PUBLISH_LIMIT within a sliding window. */
describe('refused publish guard', () => {
  const guard = () => {
    let now = 0;
    const g = new RefusedPublishGuard(() => now);
    return { take: () => g.take(), at: (ms: number) => (now = ms) };
  };
  const window = REFUSED_PUBLISH_WINDOW_S * 1000;

  it('allows the limit at once, and closes on one more within the window', () => {
    const g = guard();
    for (let i = 0; i < REFUSED_PUBLISH_LIMIT; i += 1) expect(g.take()).toBe('ok');
    g.at(window - 1);
    expect(g.take()).toBe('close');
  });

  it('never closes a device refused at the documented rate or slower', () => {
    const g = guard();
    const every = window / REFUSED_PUBLISH_LIMIT;
    for (let i = 0; i < REFUSED_PUBLISH_LIMIT * 10; i += 1) {
      g.at(i * every);
      expect(g.take(), `refusal ${i}`).toBe('ok');
    }
  });

  it('slides: the window starts at the oldest of the last refusals, not at a fixed boundary', () => {
    const g = guard();
    for (let i = 0; i < REFUSED_PUBLISH_LIMIT; i += 1) {
      g.at(i === 0 ? 0 : window - 100);
      expect(g.take()).toBe('ok');
    }
    g.at(window);
    // The oldest (t=0) is a window old: fine. The next one makes 21 within (window-100 .. window+1).
    expect(g.take()).toBe('ok');
    g.at(window + 1);
    expect(g.take()).toBe('close');
  });
});
