import type { Knex } from 'knex';
import { newTimeOrderedId } from '../shared/ids';
import type { DomainEvent, NewEvent } from './event-types';
import { claimUndispatched, insertEvents, markDispatched } from './store/events.store';
import type { EventBus } from './event-bus';
import type { Logger } from '../logger';
import type { Clock } from '../shared/clock';
import { SingleFlightLoop } from '../shared/single-flight-loop';

/**
 * Transactions that appended events, by their outermost transaction (a savepoint's events become
 * visible with its parent's commit). Only their commits wake the dispatcher: a commit that wrote
 * no event used to start a dispatch round all the same, three round trips (BEGIN, SELECT ...
 * FOR UPDATE, COMMIT) that found nothing, once per presence flush, health check and dispatch page
 * (bench/connections.bench.ts).
 */
const withEvents = new WeakSet<Knex.Transaction>();

function outermost(trx: Knex.Transaction): Knex.Transaction {
  let unit = trx;
  while (unit.parentTransaction) unit = unit.parentTransaction;
  return unit;
}

/** Whether this transaction (or a savepoint inside it) appended events: its commit should wake the outbox. */
export function appendedEvents(trx: Knex.Transaction): boolean {
  return withEvents.has(trx);
}

/**
 * Writes events in the caller's transaction: they exist exactly when the change committed. Given
 * the bare connection instead, they commit at once and nothing wakes the dispatcher: its poll
 * (at most a second later) sends them.
 */
export async function appendEvents(trx: Knex | Knex.Transaction, clock: Clock, events: NewEvent[]): Promise<void> {
  if (events.length === 0) return;
  if (isTransaction(trx)) withEvents.add(outermost(trx));
  const now = clock.now();
  await insertEvents(
    trx,
    events.map((e) => ({
      id: newTimeOrderedId(),
      accountId: e.accountId,
      type: e.type,
      subject: e.subject ?? null,
      data: e.data,
      occurredAt: e.occurredAt ?? now,
    })),
  );
}

function isTransaction(db: Knex | Knex.Transaction): db is Knex.Transaction {
  return db.isTransaction === true;
}

export interface OutboxDispatcherOptions {
  knex: Knex;
  bus: EventBus;
  logger: Logger;
  /** Safety-net poll when no commit kicked the dispatcher (ms). Default 1000. */
  pollIntervalMs?: number;
  /** Rows per round. Default 1000. */
  batchSize?: number;
  /**
   * Extra work done in the same transaction that marks a batch dispatched (webhook fan-out). It
   * may return what to do once that transaction committed (wake the webhook worker for the
   * deliveries it created).
   */
  onBatch?: (trx: Knex.Transaction, events: DomainEvent[]) => Promise<(() => void) | undefined>;
}

/**
 * Moves committed events from the outbox to the bus. Services call `kick()` after a commit so
 * delivery is immediate; a slow poll catches anything a crash left behind. Rows are claimed with
 * `FOR UPDATE SKIP LOCKED`, so several processes can dispatch at once without sending twice.
 */
export class OutboxDispatcher {
  private readonly batchSize: number;
  private readonly loop: SingleFlightLoop;

  constructor(private readonly options: OutboxDispatcherOptions) {
    this.batchSize = options.batchSize ?? 1000;
    this.loop = new SingleFlightLoop({
      round: () => this.drain(),
      onError: (error) => options.logger.error({ err: error }, 'outbox dispatch failed'),
      poll: { everyMs: options.pollIntervalMs ?? 1000 },
    });
  }

  start(): void {
    this.loop.start();
    this.loop.kick();
  }

  /** Ask for a dispatch round soon; rounds never overlap. */
  kick(): void {
    this.loop.kick();
  }

  /** Resolves once the round under way (if any) finished: tests and shutdown use it. */
  settle(): Promise<void> {
    return this.loop.settle();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  private async drain(): Promise<void> {
    for (;;) {
      if (this.loop.stopping) return;
      const { dispatched, afterCommit } = await this.options.knex.transaction(async (trx) => {
        const events = await claimUndispatched(trx, this.batchSize);
        if (events.length === 0) return { dispatched: [] };
        const after = this.options.onBatch ? await this.options.onBatch(trx, events) : undefined;
        await markDispatched(trx, { seqs: events.map((e) => e.seq) });
        return { dispatched: events, afterCommit: after };
      });
      if (dispatched.length === 0) return;
      afterCommit?.();
      await this.options.bus.publish(dispatched);
      if (dispatched.length < this.batchSize) return;
    }
  }
}
