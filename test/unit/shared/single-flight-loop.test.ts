import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SingleFlightLoop, type SingleFlightLoopOptions } from '#core/shared/single-flight-loop';

/**
 * A loop whose rounds the test finishes by hand: `finish()` ends the oldest round under way, so
 * every scenario says exactly when a round is running.
 */
function harness(options: Partial<Omit<SingleFlightLoopOptions, 'round'>> & { fail?: boolean } = {}) {
  const ends: Array<() => void> = [];
  const errors: unknown[] = [];
  let started = 0;
  let running = 0;
  let mostAtOnce = 0;
  const loop = new SingleFlightLoop({
    round: () => {
      started++;
      running++;
      mostAtOnce = Math.max(mostAtOnce, running);
      return new Promise<void>((resolve, reject) => {
        ends.push(() => {
          running--;
          if (options.fail) reject(new Error('round failed'));
          else resolve();
        });
      });
    },
    onError: options.onError ?? ((error) => errors.push(error)),
    ...(options.poll ? { poll: options.poll } : {}),
  });
  return {
    loop,
    errors,
    /** Ends the round under way and lets the loop react (a follow-up round starts in a microtask). */
    async finish() {
      const end = ends.shift();
      if (!end) throw new Error('no round is running');
      end();
      await vi.advanceTimersByTimeAsync(0);
    },
    get started() {
      return started;
    },
    get running() {
      return running;
    },
    get mostAtOnce() {
      return mostAtOnce;
    },
  };
}

/** Resolves to whether `promise` settled by now (after the microtasks queued so far). */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  await vi.advanceTimersByTimeAsync(0);
  return done;
}

describe('SingleFlightLoop', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs a kick at once when idle, and never two rounds at a time', async () => {
    const h = harness();
    h.loop.kick();
    expect(h.started).toBe(1);
    for (let i = 0; i < 10; i++) h.loop.kick();
    void h.loop.run();
    expect(h.running).toBe(1);
    await h.finish();
    await h.finish();
    expect(h.mostAtOnce).toBe(1);
  });

  it.each([
    { kicksDuringRound: 0, rounds: 1 },
    { kicksDuringRound: 1, rounds: 2 },
    { kicksDuringRound: 5, rounds: 2 },
  ])('$kicksDuringRound kick(s) during a round: $rounds round(s) in all', async ({ kicksDuringRound, rounds }) => {
    const h = harness();
    h.loop.kick();
    for (let i = 0; i < kicksDuringRound; i++) h.loop.kick();
    await h.finish();
    if (rounds === 2) await h.finish();
    expect(h.started).toBe(rounds);
    expect(h.running).toBe(0);
  });

  it('run() joins the round under way instead of asking for another', async () => {
    const h = harness();
    const first = h.loop.run();
    const joined = h.loop.run();
    expect(h.started).toBe(1);
    expect(await settled(joined)).toBe(false);
    await h.finish();
    expect(await settled(first)).toBe(true);
    expect(await settled(joined)).toBe(true);
    expect(h.started).toBe(1);
  });

  it('settle() waits for the round a kick during a round asked for', async () => {
    const h = harness();
    h.loop.kick();
    const settling = h.loop.settle();
    await h.finish();
    expect(h.started).toBe(2);
    expect(await settled(settling)).toBe(false);
    await h.finish();
    expect(await settled(settling)).toBe(true);
  });

  it('stop() waits for the round under way and lets no further round start', async () => {
    const h = harness({ poll: { everyMs: 100 } });
    h.loop.start();
    h.loop.kick();
    h.loop.kick(); // a follow-up asked for before the stop
    const stopping = h.loop.stop();
    expect(h.loop.stopping).toBe(true);
    expect(await settled(stopping)).toBe(false);
    await h.finish();
    expect(await settled(stopping)).toBe(true);
    h.loop.kick();
    await h.loop.run();
    await h.loop.settle();
    await vi.advanceTimersByTimeAsync(1000);
    expect(h.started).toBe(1);
  });

  it('polls only once started: first after firstAfterMs, then every everyMs', async () => {
    const h = harness({ poll: { everyMs: 100, firstAfterMs: 30 } });
    await vi.advanceTimersByTimeAsync(500);
    expect(h.started).toBe(0);
    h.loop.start();
    await vi.advanceTimersByTimeAsync(29);
    expect(h.started).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.started).toBe(1);
    await h.finish();
    await vi.advanceTimersByTimeAsync(99);
    expect(h.started).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.started).toBe(2);
  });

  it('a poll tick during a round adds no round; the pace stays that of the ticks', async () => {
    const h = harness({ poll: { everyMs: 100 } });
    h.loop.start();
    await vi.advanceTimersByTimeAsync(100);
    expect(h.started).toBe(1);
    await vi.advanceTimersByTimeAsync(250); // ticks at 200 and 300 find the round under way
    await h.finish();
    expect(h.started).toBe(1);
    await vi.advanceTimersByTimeAsync(50); // the tick at 400
    expect(h.started).toBe(2);
  });

  it('hands a failed round to onError and goes on', async () => {
    const h = harness({ fail: true });
    h.loop.kick();
    h.loop.kick();
    await h.finish();
    await h.finish();
    expect(h.errors).toHaveLength(2);
    expect(h.started).toBe(2);
  });

  it('runs rounds again after a stop() and a new start()', async () => {
    const h = harness({ poll: { everyMs: 100 } });
    h.loop.start();
    await h.loop.stop();
    h.loop.start();
    h.loop.kick();
    expect(h.started).toBe(1);
    await h.finish();
  });
});
