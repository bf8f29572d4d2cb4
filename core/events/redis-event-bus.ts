import type { Redis } from 'ioredis';
import type { DomainEvent } from './event-types';
import { InProcessEventBus, type EventBus, type EventHandler } from './event-bus';
import type { Logger } from '../logger';

/**
 * Cluster mode: dispatched events travel through Redis pub/sub so a portal subscribed on
 * process 1 sees a device connected to process 2. Every process (the publisher included)
 * receives each event once, from Redis. The outbox stays the source of truth: pub/sub is
 * only the live fan-out; webhooks are rows and never depend on it.
 */
export class RedisEventBus implements EventBus {
  private readonly local: InProcessEventBus;
  private readonly ready: Promise<unknown>;

  constructor(
    private readonly publisher: Redis,
    private readonly subscriber: Redis,
    private readonly logger: Logger,
    private readonly channel = 'fleet:events',
  ) {
    this.local = new InProcessEventBus(logger);
    this.subscriber.on('message', (channel: string, message: string) => {
      if (channel !== this.channel) return;
      let events: DomainEvent[];
      try {
        events = JSON.parse(message) as DomainEvent[];
      } catch (error) {
        this.logger.error({ err: error }, 'unreadable event message from redis');
        return;
      }
      void this.local.publish(events);
    });
    this.ready = this.subscriber.subscribe(this.channel);
  }

  async publish(events: DomainEvent[]): Promise<void> {
    if (events.length === 0) return;
    await this.ready;
    try {
      await this.publisher.publish(this.channel, JSON.stringify(events));
    } catch (error) {
      // Redis down: deliver to this process's own subscribers at least.
      this.logger.warn({ err: error }, 'redis publish failed; delivering events locally only');
      await this.local.publish(events);
    }
  }

  subscribe(handler: EventHandler): () => void {
    return this.local.subscribe(handler);
  }

  async close(): Promise<void> {
    await this.local.close();
  }
}
