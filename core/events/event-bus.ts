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

  publish(events: DomainEvent[]): Promise<void> {
    for (const event of events) {
      for (const handler of this.handlers) {
        // A failing subscriber is logged and never breaks the publisher or the other subscribers.
        try {
          // `unknown`: a handler typed to return void may return anything (`(e) => set.add(e)`
          // returns the set); only a promise is watched for a later failure.
          const result: unknown = handler(event);
          if (result instanceof Promise)
            result.catch((error: unknown) =>
              this.logger.error({ err: error, eventType: event.type }, 'event subscriber failed'),
            );
        } catch (error) {
          this.logger.error({ err: error, eventType: event.type }, 'event subscriber failed');
        }
      }
    }
    return Promise.resolve();
  }

  subscribe(handler: EventHandler): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  close(): Promise<void> {
    this.handlers.clear();
    return Promise.resolve();
  }
}
