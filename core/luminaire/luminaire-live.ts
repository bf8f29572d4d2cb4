import { PushQueue } from '../events/push-queue';
import type { RecordedReading } from './luminaire-ingest';

/** Where readings go after their commit, and where a live subscription takes them from. */
export interface LuminaireLiveFeed {
  subscribe(input: { accountId: string; deviceId: string }): PushQueue<RecordedReading>;
  publish(readings: RecordedReading[]): void;
  /** Subscriptions open on this process. */
  readonly size: number;
}

/**
 * Live luminaire readings for GraphQL subscriptions, routed by account and device so a
 * subscriber only ever gets the device it asked for, of its own account (the resolver checks the
 * serial with the caller's account first). Readings are pushed after their commit, straight from
 * the ingest of this process: they do not go through the outbox (a reading is not an event a
 * webhook or the event log should carry, and a fleet sends thousands a minute). In cluster mode
 * the readings travel through Redis (core/cluster/redis-luminaire-live.ts).
 */
export class LuminaireLive implements LuminaireLiveFeed {
  private readonly byDevice = new Map<string, Set<PushQueue<RecordedReading>>>();

  /** `onEnd`: after the subscription ended (the client left or the stream was closed). */
  subscribe(input: { accountId: string; deviceId: string }, onEnd?: () => void): PushQueue<RecordedReading> {
    const key = `${input.accountId}|${input.deviceId}`;
    let set = this.byDevice.get(key);
    if (!set) this.byDevice.set(key, (set = new Set()));
    const subscribers = set;
    const queue: PushQueue<RecordedReading> = new PushQueue<RecordedReading>({
      max: 100,
      onEnd: () => {
        subscribers.delete(queue);
        if (subscribers.size === 0) this.byDevice.delete(key);
        onEnd?.();
      },
    });
    subscribers.add(queue);
    return queue;
  }

  publish(readings: RecordedReading[]): void {
    if (this.byDevice.size === 0) return;
    for (const r of readings)
      for (const queue of this.byDevice.get(`${r.accountId}|${r.deviceId}`) ?? []) queue.push(r);
  }

  get size(): number {
    let n = 0;
    for (const set of this.byDevice.values()) n += set.size;
    return n;
  }
}
