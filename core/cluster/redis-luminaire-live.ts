import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { Logger } from '../logger';
import type { PushQueue } from '../events/push-queue';
import { LuminaireLive, type LuminaireLiveFeed } from '../luminaire/luminaire-live';
import type { RecordedReading } from '../luminaire/luminaire-ingest';

const Message = z.object({
  accountId: z.string().min(1).max(64),
  deviceId: z.string().min(1).max(64),
  serial: z.string().min(1).max(64),
  at: z.iso.datetime(),
  values: z.record(z.string(), z.number()),
});

/**
 * Cluster mode: a device's readings reach a subscriber on any process. Each device has its own
 * Redis channel (`prefix:luminaire:<account>:<device>`), which a process subscribes to only while
 * one of its own subscriptions watches that device, so Redis forwards nothing nobody watches.
 * The process that stored the readings publishes each on its device's channel, one pipeline per
 * batch; it hears its own readings back from Redis like every other process (never twice). When
 * Redis is away, readings still reach this process's own subscribers. Pub/sub keeps nothing: a
 * live view is only a view, the series is in the database.
 */
export class RedisLuminaireLive implements LuminaireLiveFeed {
  private readonly local = new LuminaireLive();
  /** Local subscriptions per channel, so the channel is left when its last one ends. */
  private readonly watching = new Map<string, number>();
  private readonly channelPrefix: string;

  constructor(
    private readonly publisher: Redis,
    private readonly subscriber: Redis,
    private readonly logger: Logger,
    prefix: string,
  ) {
    this.channelPrefix = `${prefix}:luminaire:`;
    subscriber.on('message', (channel: string, message: string) => {
      if (!channel.startsWith(this.channelPrefix)) return;
      const reading = this.read(channel, message);
      if (reading) this.local.publish([reading]);
    });
  }

  subscribe(input: { accountId: string; deviceId: string }): PushQueue<RecordedReading> {
    const channel = this.channelOf(input.accountId, input.deviceId);
    const queue = this.local.subscribe(input, () => this.leave(channel));
    const count = this.watching.get(channel) ?? 0;
    this.watching.set(channel, count + 1);
    if (count === 0)
      this.subscriber.subscribe(channel).catch((err: unknown) => {
        this.logger.warn({ err }, 'redis subscribe for live luminaire readings failed');
      });
    return queue;
  }

  private leave(channel: string): void {
    const left = (this.watching.get(channel) ?? 1) - 1;
    if (left > 0) {
      this.watching.set(channel, left);
      return;
    }
    this.watching.delete(channel);
    this.subscriber.unsubscribe(channel).catch(() => undefined);
  }

  publish(readings: RecordedReading[]): void {
    if (readings.length === 0) return;
    const pipeline = this.publisher.pipeline();
    for (const r of readings)
      pipeline.publish(
        this.channelOf(r.accountId, r.deviceId),
        JSON.stringify({ accountId: r.accountId, deviceId: r.deviceId, serial: r.serial, at: r.at, values: r.values }),
      );
    pipeline.exec().catch((err: unknown) => {
      this.logger.warn({ err }, 'redis publish of live luminaire readings failed; delivering locally only');
      this.local.publish(readings);
    });
  }

  get size(): number {
    return this.local.size;
  }

  private channelOf(accountId: string, deviceId: string): string {
    return `${this.channelPrefix}${accountId}:${deviceId}`;
  }

  /** A message whose account and device are not those of its channel is dropped, never delivered. */
  private read(channel: string, message: string): RecordedReading | null {
    let parsed: z.infer<typeof Message>;
    try {
      parsed = Message.parse(JSON.parse(message));
    } catch (err) {
      this.logger.warn({ err }, 'unreadable live luminaire reading from redis');
      return null;
    }
    if (this.channelOf(parsed.accountId, parsed.deviceId) !== channel) return null;
    return { ...parsed, at: new Date(parsed.at) };
  }
}
