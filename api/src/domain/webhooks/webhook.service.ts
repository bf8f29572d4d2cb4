import { z } from 'zod';
import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import { newId, isUuid } from '../shared/ids';
import { DomainError, notFound } from '../shared/errors';
import { generateSecret } from '../shared/secrets';
import { requireAdmin, type Actor } from '../shared/actor';
import { jsonCursor } from '../shared/cursor';
import type { ServerSecret } from '../shared/server-secret';
import { PUBLIC_EVENT_TYPES } from '../../events/event-types';
import { checkWebhookDestination, type HostResolver } from './url-guard';
import {
  DELIVERY_STATUSES, eventBody, toDelivery, toWebhook,
  type DeliveryRow, type Webhook, type WebhookDelivery, type WebhookDeliveryAttempt, type WebhookRow,
} from './webhook-types';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
/** Purpose of the server key that seals webhook secrets (server-secret.ts). */
export const WEBHOOK_SECRET_PURPOSE = 'webhook-secrets';
export const MAX_WEBHOOKS_PER_ACCOUNT = 20;
export const MAX_DELIVERY_PAGE = 200;

const EventTypes = z
  .array(z.enum(PUBLIC_EVENT_TYPES as [string, ...string[]]))
  .min(1)
  .max(PUBLIC_EVENT_TYPES.length)
  .refine((types) => new Set(types).size === types.length, 'must not repeat a type');

export const CreateWebhookInput = z.strictObject({
  url: z.string().trim().min(1).max(2048),
  eventTypes: EventTypes,
  enabled: z.boolean().default(true),
});
export type CreateWebhookInput = z.input<typeof CreateWebhookInput>;

export const UpdateWebhookInput = z.strictObject({
  url: z.string().trim().min(1).max(2048).optional(),
  eventTypes: EventTypes.optional(),
  enabled: z.boolean().optional(),
});
export type UpdateWebhookInput = z.input<typeof UpdateWebhookInput>;

export const ListDeliveriesInput = z.object({
  first: z.number().int().min(1).max(MAX_DELIVERY_PAGE).default(50),
  after: z.string().max(200).nullish(),
  status: z.enum(DELIVERY_STATUSES).nullish(),
});
export type ListDeliveriesInput = z.input<typeof ListDeliveriesInput>;

export interface WebhookServiceOptions {
  /** Seals the signing secrets (AES-256-GCM); absent in tools that never touch webhooks. */
  serverSecret?: ServerSecret | undefined;
  /** WEBHOOK_ALLOW_PRIVATE: receivers on loopback/private networks allowed (tests, demos). */
  allowPrivate?: boolean | undefined;
  /** DNS for the creation check of receiver names. Default: the system resolver (dns.lookup). */
  resolveHost?: HostResolver | undefined;
}

const deliveryCursor = jsonCursor<[number, string]>({
  read: (value) => (Array.isArray(value) && Number.isInteger(value[0]) && isUuid(value[1]) ? [Number(value[0]), value[1]] : null),
  invalid: () => new DomainError('validation_failed', 'The cursor is not valid.', { errors: [{ field: 'after', message: 'is not a cursor from this list' }] }),
});
const encodeCursor = (row: { event_seq: number; id: string }) => deliveryCursor.encode([Number(row.event_seq), row.id]);
const decodeCursor = (cursor: string): [number, string] => deliveryCursor.decode(cursor);

/**
 * Webhook endpoints per account and their delivery log. The secret is shown once, stored
 * sealed with the server key (it must be usable to sign, so it cannot be hashed).
 * Deliveries themselves are created by the outbox dispatcher (webhook-fanout.ts) and sent by
 * the delivery worker (delivery-worker.ts).
 */
export class WebhookService {
  private readonly allowPrivate: boolean;

  constructor(
    private readonly deps: ServiceDeps,
    private readonly options: WebhookServiceOptions = {},
  ) {
    this.allowPrivate = options.allowPrivate ?? false;
  }

  private sealer(): ServerSecret {
    if (!this.options.serverSecret) throw new DomainError('service_unavailable', 'Webhooks need the server secret, which this process did not load.');
    return this.options.serverSecret;
  }

  private async checkUrl(url: string): Promise<void> {
    const problem = await checkWebhookDestination(url, this.allowPrivate, this.options.resolveHost);
    if (problem) throw new DomainError('validation_failed', `The webhook URL ${problem}.`, { errors: [{ field: 'url', message: problem }] });
  }

  async create(actor: Actor, raw: CreateWebhookInput): Promise<{ webhook: Webhook; secret: string }> {
    requireAdmin(actor);
    const input = CreateWebhookInput.parse(raw);
    await this.checkUrl(input.url);
    const secret = generateSecret(WEBHOOK_SECRET_PREFIX);
    const sealed = this.sealer().encrypt(WEBHOOK_SECRET_PURPOSE, secret);
    const row: WebhookRow = {
      id: newId(),
      account_id: actor.accountId,
      url: input.url,
      event_types: input.eventTypes,
      secret_ciphertext: sealed,
      secret_prefix: secret.slice(0, WEBHOOK_SECRET_PREFIX.length + 6),
      enabled: input.enabled,
      disabled_reason: null,
      failing_since: null,
      created_at: this.deps.clock.now(),
    };
    await this.deps.transaction(async (trx) => {
      // Serialises concurrent creates of one account so the cap holds.
      await trx('accounts').where({ id: actor.accountId }).forUpdate().first('id');
      const count = Number((await trx('webhooks').where({ account_id: actor.accountId }).count<{ count: string }[]>('* as count'))[0]?.count ?? 0);
      if (count >= MAX_WEBHOOKS_PER_ACCOUNT) throw new DomainError('conflict', `An account can have at most ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks.`);
      await trx('webhooks').insert(row);
    });
    return { webhook: toWebhook(row), secret };
  }

  async list(actor: Actor): Promise<Webhook[]> {
    const rows = (await this.deps.knex('webhooks').where({ account_id: actor.accountId }).orderBy('created_at')) as WebhookRow[];
    return rows.map(toWebhook);
  }

  async get(actor: Actor, id: string): Promise<Webhook> {
    return toWebhook(await this.row(this.deps.knex, actor, id));
  }

  private async row(db: Knex | Knex.Transaction, actor: Actor, id: string): Promise<WebhookRow> {
    if (!isUuid(id)) throw notFound('Webhook');
    const row = (await db('webhooks').where({ id, account_id: actor.accountId }).first()) as WebhookRow | undefined;
    if (!row) throw notFound('Webhook');
    return row;
  }

  /** Change url, types or enabled; enabling clears the reason it was disabled and its failure run. */
  async update(actor: Actor, id: string, raw: UpdateWebhookInput): Promise<Webhook> {
    requireAdmin(actor);
    const input = UpdateWebhookInput.parse(raw);
    if (input.url !== undefined) await this.checkUrl(input.url);
    await this.row(this.deps.knex, actor, id);
    const patch: Record<string, unknown> = {};
    if (input.url !== undefined) patch.url = input.url;
    if (input.eventTypes !== undefined) patch.event_types = input.eventTypes;
    if (input.enabled !== undefined) {
      patch.enabled = input.enabled;
      patch.disabled_reason = input.enabled ? null : 'disabled by a user';
      if (input.enabled) patch.failing_since = null;
    }
    if (Object.keys(patch).length === 0) return this.get(actor, id);
    const [row] = (await this.deps.knex('webhooks').where({ id, account_id: actor.accountId }).update(patch).returning('*')) as WebhookRow[];
    if (!row) throw notFound('Webhook');
    return toWebhook(row);
  }

  /** Deletes the endpoint with its deliveries (and their pending retries). */
  async delete(actor: Actor, id: string): Promise<Webhook> {
    requireAdmin(actor);
    if (!isUuid(id)) throw notFound('Webhook');
    const [row] = (await this.deps.knex('webhooks').where({ id, account_id: actor.accountId }).delete().returning('*')) as WebhookRow[];
    if (!row) throw notFound('Webhook');
    return toWebhook(row);
  }

  /** The delivery log of one endpoint, newest event first, with every attempt. */
  async deliveries(actor: Actor, webhookId: string, raw: ListDeliveriesInput = {}): Promise<{ deliveries: WebhookDelivery[]; nextCursor: string | null }> {
    const input = ListDeliveriesInput.parse(raw);
    await this.row(this.deps.knex, actor, webhookId);
    const query = this.deps
      .knex('webhook_deliveries')
      .where({ webhook_id: webhookId, account_id: actor.accountId })
      .orderBy([{ column: 'event_seq', order: 'desc' }, { column: 'id', order: 'desc' }])
      .limit(input.first + 1);
    if (input.status) query.where({ status: input.status });
    if (input.after) {
      const [seq, id] = decodeCursor(input.after);
      query.whereRaw('(event_seq, id) < (?, ?)', [seq, id]);
    }
    const rows = (await query) as DeliveryRow[];
    const page = rows.slice(0, input.first);
    return { deliveries: await this.present(page), nextCursor: rows.length > input.first ? encodeCursor(page[page.length - 1]!) : null };
  }

  async delivery(actor: Actor, id: string): Promise<WebhookDelivery> {
    if (!isUuid(id)) throw notFound('Delivery');
    const row = (await this.deps.knex('webhook_deliveries').where({ id, account_id: actor.accountId }).first()) as DeliveryRow | undefined;
    if (!row) throw notFound('Delivery');
    return (await this.present([row]))[0]!;
  }

  /**
   * Send the delivery's event again as soon as possible (same event id and body; a new
   * attempt in its log). Refused while the endpoint is disabled: enable it first.
   */
  async redeliver(actor: Actor, deliveryId: string, options: { webhookId?: string } = {}): Promise<WebhookDelivery> {
    requireAdmin(actor);
    if (!isUuid(deliveryId)) throw notFound('Delivery');
    const now = this.deps.clock.now();
    await this.deps.transaction(async (trx) => {
      const found = (await trx('webhook_deliveries').where({ id: deliveryId, account_id: actor.accountId }).first('event_seq')) as { event_seq: string } | undefined;
      if (!found) throw notFound('Delivery');
      // The event first, then the delivery: the retention pass locks in the same order, so a
      // redelivery either keeps the event alive or finds it gone, never a pending delivery without one.
      const event = await trx('events').where({ seq: found.event_seq }).forShare().first('seq');
      if (!event) throw new DomainError('invalid_state', 'The event of this delivery is past its retention (EVENT_RETENTION_DAYS) and can no longer be sent.');
      const row = (await trx('webhook_deliveries').where({ id: deliveryId, account_id: actor.accountId }).forUpdate().first()) as DeliveryRow | undefined;
      if (!row || (options.webhookId !== undefined && row.webhook_id !== options.webhookId)) throw notFound('Delivery');
      const hook = (await trx('webhooks').where({ id: row.webhook_id }).first('enabled')) as { enabled: boolean } | undefined;
      if (!hook?.enabled) throw new DomainError('invalid_state', 'The webhook is disabled; enable it before redelivering.');
      await trx('webhook_deliveries')
        .where({ id: deliveryId })
        .update({ status: 'pending', next_attempt_at: now, delivered_at: null, locked_until: null, created_at: row.status === 'pending' ? row.created_at : now });
    });
    return this.delivery(actor, deliveryId);
  }

  private async present(rows: DeliveryRow[]): Promise<WebhookDelivery[]> {
    if (rows.length === 0) return [];
    const [events, attempts] = await Promise.all([
      this.deps.knex('events').whereIn('id', [...new Set(rows.map((r) => r.event_id))]).select('id', 'type', 'occurred_at', 'data'),
      this.deps.knex('webhook_delivery_attempts').whereIn('delivery_id', rows.map((r) => r.id)).orderBy('id'),
    ]);
    const eventById = new Map((events as Array<{ id: string; type: string; occurred_at: Date; data: Record<string, unknown> }>).map((e) => [e.id, eventBody(e)]));
    const attemptsByDelivery = new Map<string, WebhookDeliveryAttempt[]>();
    for (const a of attempts as Array<{ delivery_id: string; attempted_at: Date; status_code: number | null; duration_ms: number; error: string | null }>) {
      const list = attemptsByDelivery.get(a.delivery_id) ?? [];
      list.push({ attemptedAt: new Date(a.attempted_at).toISOString(), statusCode: a.status_code, durationMs: a.duration_ms, error: a.error });
      attemptsByDelivery.set(a.delivery_id, list);
    }
    return rows.map((row) =>
      toDelivery(row, eventById.get(row.event_id) ?? { id: row.event_id, type: 'unknown', occurred_at: new Date(row.created_at).toISOString(), data: {} }, attemptsByDelivery.get(row.id) ?? []),
    );
  }
}
