import type { Knex } from 'knex';
import type { Clock } from '../shared/clock';
import type { Logger } from '../logger';
import { SingleFlightLoop } from '../shared/single-flight-loop';
import type { ServerSecret } from '../shared/server-secret';
import { WEBHOOK_SECRET_PURPOSE } from './webhook.service';
import { signatureHeader, SIGNATURE_HEADER } from './webhook-signing';
import { createHttpSender, type SendResult, type WebhookSender } from './webhook-sender';
import type { DeliveryRecord } from './webhook-types';
import { afterAttempt, failureRun, MAX_PER_ENDPOINT, pickForAttempt, truncatedError } from './delivery-rules';
import {
  eventBodyOf,
  insertAttempt,
  leaseDeliveries,
  lockDueDeliveries,
  saveAttempted,
} from './store/deliveries.store';
import { endFailureRun, lockFailureRun, recordFailureRun, webhookTarget } from './store/webhooks.store';

export interface DeliveryWorkerOptions {
  knex: Knex;
  clock: Clock;
  logger: Logger;
  serverSecret: ServerSecret;
  /** WEBHOOK_ALLOW_PRIVATE. */
  allowPrivate: boolean;
  /** Per attempt, connect to end of response (ms). Default 10,000. */
  timeoutMs?: number;
  /** Attempts in flight at once. Default 8. */
  concurrency?: number;
  /** Poll for due retries this often (ms). Default 1,000. */
  pollIntervalMs?: number;
  /** Replaces the HTTP client (tests). */
  sender?: WebhookSender;
  onAttempt?: (outcome: 'delivered' | 'failed' | 'gave_up') => void;
}

/** A claimed delivery's lease: longer than one attempt, so a crash mid-send only delays it. */
const LEASE_MARGIN_MS = 30_000;

/**
 * Sends due webhook deliveries. Everything it needs is in rows (no timers hold state), so a
 * restart loses nothing: `next_attempt_at` says when, `locked_until` is the lease of the
 * process sending it (claimed with FOR UPDATE SKIP LOCKED, so several processes share the
 * work without sending twice). Per endpoint and ordering key (the event's subject, e.g. a
 * serial) a delivery waits while an earlier one is still pending: a receiver sees one
 * device's events in order, even across retries.
 */
export class WebhookDeliveryWorker {
  private readonly sender: WebhookSender;
  private readonly timeoutMs: number;
  private readonly concurrency: number;
  private readonly loop: SingleFlightLoop;

  constructor(private readonly options: DeliveryWorkerOptions) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.concurrency = options.concurrency ?? 8;
    this.sender = options.sender ?? createHttpSender({ timeoutMs: this.timeoutMs, allowPrivate: options.allowPrivate });
    this.loop = new SingleFlightLoop({
      round: () => this.drain(),
      onError: (error) => options.logger.error({ err: error }, 'webhook delivery round failed'),
      poll: { everyMs: options.pollIntervalMs ?? 1000 },
    });
  }

  start(): void {
    this.loop.start();
    this.loop.kick();
  }

  /** Look for due deliveries now (new events, manual redelivery). Rounds never overlap. */
  kick(): void {
    this.loop.kick();
  }

  /** Resolves when no round is running (tests: kick, then await this). */
  settle(): Promise<void> {
    return this.loop.settle();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  private async drain(): Promise<void> {
    for (;;) {
      if (this.loop.stopping) return;
      const claimed = await this.claim();
      if (claimed.length === 0) return;
      // Deliveries of one claim round have distinct ordering keys per endpoint (see claim()).
      await Promise.all(claimed.map((row) => this.attempt(row)));
    }
  }

  /** Due, unleased deliveries of enabled endpoints whose earlier same-subject deliveries are done. */
  private async claim(): Promise<DeliveryRecord[]> {
    const now = this.options.clock.now();
    return this.options.knex.transaction(async (trx) => {
      const due = await lockDueDeliveries(trx, { now, limit: this.concurrency * 4 });
      const picked = pickForAttempt(due, { perEndpoint: MAX_PER_ENDPOINT, total: this.concurrency });
      if (picked.length === 0) return [];
      await leaseDeliveries(trx, {
        ids: picked.map((d) => d.id),
        lockedUntil: new Date(now.getTime() + this.timeoutMs + LEASE_MARGIN_MS),
      });
      return picked;
    });
  }

  private async attempt(delivery: DeliveryRecord): Promise<void> {
    const { knex, clock, logger } = this.options;
    let result: SendResult;
    const hook = await webhookTarget(knex, delivery.webhookId);
    const event = await eventBodyOf(knex, delivery.eventId);
    if (!hook || !event) return; // endpoint deleted meanwhile (its deliveries went with it)
    const attemptedAt = clock.now();
    try {
      const secret = this.options.serverSecret.decrypt(WEBHOOK_SECRET_PURPOSE, hook.secretCiphertext);
      const body = JSON.stringify(event);
      const timestamp = Math.floor(attemptedAt.getTime() / 1000);
      result = await this.sender({
        url: hook.url,
        body,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'fleet-webhooks/1',
          [SIGNATURE_HEADER]: signatureHeader(secret, body, timestamp),
          'Fleet-Event-Id': event.id,
          'Fleet-Event-Type': event.type,
          'Fleet-Delivery-Id': delivery.id,
        },
      });
    } catch (error) {
      // A secret sealed under another server key (FLEET_SECRET changed) cannot be used.
      logger.error({ err: error, deliveryId: delivery.id }, 'webhook delivery could not be prepared');
      result = {
        statusCode: null,
        durationMs: 0,
        error: 'the endpoint secret cannot be decrypted with this server key',
      };
    }
    await this.record(delivery, attemptedAt, result);
  }

  private async record(delivery: DeliveryRecord, attemptedAt: Date, result: SendResult): Promise<void> {
    const now = this.options.clock.now();
    const { outcome, delivery: attempted } = afterAttempt({
      attemptsBefore: delivery.attempts,
      createdAt: delivery.createdAt,
      now,
      result,
    });
    await this.options.knex.transaction(async (trx) => {
      await insertAttempt(trx, {
        deliveryId: delivery.id,
        attempt: {
          attemptedAt,
          statusCode: result.statusCode,
          durationMs: result.durationMs,
          error: truncatedError(result.error),
        },
      });
      await saveAttempted(trx, { id: delivery.id, delivery: attempted });
      if (attempted.status === 'delivered') {
        await endFailureRun(trx, delivery.webhookId);
        return;
      }
      const hook = await lockFailureRun(trx, delivery.webhookId);
      if (!hook) return;
      const run = failureRun({ failingSince: hook.failingSince, now });
      if (run.disabledReason !== null)
        this.options.logger.warn({ webhookId: delivery.webhookId }, 'webhook disabled after failing for too long');
      await recordFailureRun(trx, { id: delivery.webhookId, ...run });
    });
    this.options.onAttempt?.(outcome);
  }
}
