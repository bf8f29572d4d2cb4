import type { DomainEvent } from './event-types';
import type { Logger } from '../logger';

export type EventHandler = (event: DomainEvent) => void | Promise<void>;

/**
 * Where dispatched events go. In one process this is in-memory; in cluster mode a Redis
 * transport implements the same interface so every process sees every event.
 */
export interface EventBus {
  publish(events: DomainEvent[]): Promise<void>;
  /** Returns the unsubscribe function. */
  subscribe(handler: EventHandler): () => void;
  close(): Promise<void>;
}

export class InProcessEventBus implements EventBus {
  private readonly handlers = new Set<EventHandler>();
  constructor(private readonly logger: Logger) {}

  async publish(events: DomainEvent[]): Promise<void> {
    for (const event of events) {
      for (const handler of this.handlers) {
        // A failing subscriber is logged and never breaks the publisher or the other subscribers.
        try {
          const result = handler(event);
          if (result && typeof (result as Promise<void>).catch === 'function') {
            (result as Promise<void>).catch((error: unknown) =>
              this.logger.error({ err: error, eventType: event.type }, 'event subscriber failed'),
            );
          }
        } catch (error) {
          this.logger.error({ err: error, eventType: event.type }, 'event subscriber failed');
        }
      }
    }
  }

  subscribe(handler: EventHandler): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  async close(): Promise<void> {
    this.handlers.clear();
  }
}
