import type { EventBus } from './event-bus';
import type { DomainEvent } from './event-types';
import type { Logger } from '../logger';

export type AccountListener = (event: DomainEvent) => void;

/**
 * The live side of the one event pipeline: outbox -> dispatcher -> EventBus -> this hub ->
 * subscriptions. It holds ONE bus subscription and routes each event to the listeners of its
 * account only, so a subscriber can never receive another tenant's event and the cost per
 * event does not grow with the number of other accounts' subscribers.
 */
export class LiveEventHub {
  private readonly byAccount = new Map<string, Set<AccountListener>>();
  private readonly unsubscribeBus: () => void;

  constructor(
    bus: EventBus,
    private readonly logger: Logger,
  ) {
    this.unsubscribeBus = bus.subscribe((event) => this.route(event));
  }

  subscribe(accountId: string, listener: AccountListener): () => void {
    let set = this.byAccount.get(accountId);
    if (!set) {
      set = new Set();
      this.byAccount.set(accountId, set);
    }
    set.add(listener);
    return () => {
      const current = this.byAccount.get(accountId);
      if (!current) return;
      current.delete(listener);
      if (current.size === 0) this.byAccount.delete(accountId);
    };
  }

  /** Number of listeners (metrics, tests). */
  get size(): number {
    let n = 0;
    for (const set of this.byAccount.values()) n += set.size;
    return n;
  }

  private route(event: DomainEvent): void {
    const listeners = this.byAccount.get(event.accountId);
    if (!listeners) return;
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (error) {
        this.logger.error({ err: error, eventType: event.type }, 'live listener failed');
      }
    }
  }

  close(): void {
    this.unsubscribeBus();
    this.byAccount.clear();
  }
}
