import type { Knex } from 'knex';
import type { Clock } from '../shared/clock';
import type { Logger } from '../../logger';
import type { ServerSecret } from '../shared/server-secret';
import { WEBHOOK_SECRET_PURPOSE } from './webhook.service';
import { signatureHeader, SIGNATURE_HEADER } from './webhook-signing';
import { retryDelayMs, RETRY_WINDOW_MS, DISABLE_AFTER_MS } from './backoff';
import { createHttpSender, type SendResult, type WebhookSender } from './webhook-sender';
import { eventBody, type DeliveryRow } from './webhook-types';

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

/** Attempts in flight per endpoint. */
const MAX_PER_ENDPOINT = 4;
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
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private again = false;
  private stopped = true;
  private idle: Promise<void> = Promise.resolve();

  constructor(private readonly options: DeliveryWorkerOptions) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.concurrency = options.concurrency ?? 8;
    this.sender = options.sender ?? createHttpSender({ timeoutMs: this.timeoutMs, allowPrivate: options.allowPrivate });
  }

  start(): void {
    this.stopped = false;
    this.timer = setInterval(() => this.kick(), this.options.pollIntervalMs ?? 1000);
    this.timer.unref();
    this.kick();
  }

  /** Look for due deliveries now (new events, manual redelivery). Rounds never overlap. */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.idle = this.drain()
      .catch((error: unknown) => this.options.logger.error({ err: error }, 'webhook delivery round failed'))
      .finally(() => {
        this.running = false;
        if (this.again && !this.stopped) {
          this.again = false;
          this.kick();
        }
      });
  }

  /** Resolves when no round is running (tests: kick, then await this). */
  async settle(): Promise<void> {
    this.kick();
    do await this.idle;
    while (this.running);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.idle;
  }

  private async drain(): Promise<void> {
    for (;;) {
      if (this.stopped) return;
      const claimed = await this.claim();
      if (claimed.length === 0) return;
      // Deliveries of one claim round have distinct ordering keys per endpoint (see claim()).
      await Promise.all(claimed.map((row) => this.attempt(row)));
    }
  }

  /** Due, unleased deliveries of enabled endpoints whose earlier same-subject deliveries are done. */
  private async claim(): Promise<DeliveryRow[]> {
    const now = this.options.clock.now();
    return this.options.knex.transaction(async (trx) => {
      const rows = (await trx('webhook_deliveries as d')
        .join('webhooks as w', 'w.id', 'd.webhook_id')
        .where('d.status', 'pending')
        .where('w.enabled', true)
        .where('d.next_attempt_at', '<=', now)
        .where((q) => q.whereNull('d.locked_until').orWhere('d.locked_until', '<=', now))
        .whereNotExists(function earlier() {
          this.select(trx.raw('1'))
            .from('webhook_deliveries as e')
            .whereRaw('e.webhook_id = d.webhook_id')
            .whereRaw('e.ordering_key = d.ordering_key')
            .where('e.status', 'pending')
            .whereRaw('e.event_seq < d.event_seq');
        })
        .orderBy([{ column: 'd.next_attempt_at' }, { column: 'd.event_seq' }])
        .limit(this.concurrency * 4)
        .forUpdate('d')
        .skipLocked()
        .select('d.*')) as DeliveryRow[];
      // At most MAX_PER_ENDPOINT attempts per endpoint at once: a receiver that hangs until the
      // timeout cannot take every slot from the other endpoints.
      const perEndpoint = new Map<string, number>();
      const picked = rows.filter((r) => {
        const n = perEndpoint.get(r.webhook_id) ?? 0;
        if (n >= MAX_PER_ENDPOINT) return false;
        perEndpoint.set(r.webhook_id, n + 1);
        return true;
      }).slice(0, this.concurrency);
      if (picked.length === 0) return [];
      await trx('webhook_deliveries')
        .whereIn('id', picked.map((r) => r.id))
        .update({ locked_until: new Date(now.getTime() + this.timeoutMs + LEASE_MARGIN_MS) });
      return picked;
    });
  }

  private async attempt(row: DeliveryRow): Promise<void> {
    const { knex, clock, logger } = this.options;
    let result: SendResult;
    const hook = (await knex('webhooks').where({ id: row.webhook_id }).first('url', 'secret_ciphertext')) as { url: string; secret_ciphertext: string } | undefined;
    const event = (await knex('events').where({ id: row.event_id }).first('id', 'type', 'occurred_at', 'data')) as
      | { id: string; type: string; occurred_at: Date; data: Record<string, unknown> }
      | undefined;
    if (!hook || !event) return; // endpoint deleted meanwhile (its deliveries went with it)
    const attemptedAt = clock.now();
    try {
      const secret = this.options.serverSecret.decrypt(WEBHOOK_SECRET_PURPOSE, hook.secret_ciphertext);
      const body = JSON.stringify(eventBody(event));
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
          'Fleet-Delivery-Id': row.id,
        },
      });
    } catch (error) {
      // A secret sealed under another server key (FLEET_SECRET changed) cannot be used.
      logger.error({ err: error, deliveryId: row.id }, 'webhook delivery could not be prepared');
      result = { statusCode: null, durationMs: 0, error: 'the endpoint secret cannot be decrypted with this server key' };
    }
    await this.record(row, attemptedAt, result);
  }

  private async record(row: DeliveryRow, attemptedAt: Date, result: SendResult): Promise<void> {
    const now = this.options.clock.now();
    const delivered = result.error === null;
    const attempts = row.attempts + 1;
    let outcome: 'delivered' | 'failed' | 'gave_up' = delivered ? 'delivered' : 'failed';
    await this.options.knex.transaction(async (trx) => {
      await trx('webhook_delivery_attempts').insert({
        delivery_id: row.id,
        attempted_at: attemptedAt,
        status_code: result.statusCode,
        duration_ms: result.durationMs,
        error: result.error?.slice(0, 500) ?? null,
      });
      const common = {
        attempts,
        locked_until: null,
        last_status_code: result.statusCode,
        last_error: result.error?.slice(0, 500) ?? null,
        last_duration_ms: result.durationMs,
      };
      if (delivered) {
        await trx('webhook_deliveries').where({ id: row.id }).update({ ...common, status: 'delivered', delivered_at: now });
        await trx('webhooks').where({ id: row.webhook_id }).whereNotNull('failing_since').update({ failing_since: null });
        return;
      }
      const giveUp = now.getTime() - new Date(row.created_at).getTime() >= RETRY_WINDOW_MS;
      if (giveUp) outcome = 'gave_up';
      await trx('webhook_deliveries')
        .where({ id: row.id })
        .update({ ...common, status: giveUp ? 'failed' : 'pending', next_attempt_at: new Date(now.getTime() + retryDelayMs(attempts)) });
      const hook = (await trx('webhooks').where({ id: row.webhook_id }).forUpdate().first('failing_since')) as { failing_since: Date | null } | undefined;
      if (!hook) return;
      const since = hook.failing_since ? new Date(hook.failing_since) : now;
      const patch: Record<string, unknown> = { failing_since: since };
      if (now.getTime() - since.getTime() >= DISABLE_AFTER_MS) {
        patch.enabled = false;
        patch.disabled_reason = `every delivery failed since ${since.toISOString()} (disabled after ${DISABLE_AFTER_MS / 86_400_000} days)`;
        this.options.logger.warn({ webhookId: row.webhook_id }, 'webhook disabled after failing for too long');
      }
      await trx('webhooks').where({ id: row.webhook_id }).update(patch);
    });
    this.options.onAttempt?.(outcome);
  }
}
