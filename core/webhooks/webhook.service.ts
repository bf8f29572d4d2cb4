import { z } from 'zod';
import type { ServiceDeps } from '../service-deps';
import { newId, isUuid } from '../shared/ids';
import { DomainError, notFound } from '../shared/errors';
import { generateSecret } from '../shared/secrets';
import { requireAdmin, type Actor } from '../shared/actor';
import { jsonCursor, keysetPage } from '../shared/cursor';
import type { ServerSecret } from '../shared/server-secret';
import { PUBLIC_EVENT_TYPES } from '../events/event-types';
import { checkWebhookDestination, type HostResolver } from './url-guard';
import {
  DELIVERY_STATUSES,
  toDelivery,
  type DeliveryRecord,
  type Webhook,
  type WebhookDelivery,
} from './webhook-types';
import { redelivered } from './delivery-rules';
import * as webhooks from './store/webhooks.store';
import * as deliveries from './store/deliveries.store';

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
  read: (value) =>
    Array.isArray(value) && Number.isInteger(value[0]) && isUuid(value[1]) ? [Number(value[0]), value[1]] : null,
  invalid: () =>
    new DomainError('validation_failed', 'The cursor is not valid.', {
      errors: [{ field: 'after', message: 'is not a cursor from this list' }],
    }),
});
const encodeCursor = (delivery: { eventSeq: number; id: string }) =>
  deliveryCursor.encode([delivery.eventSeq, delivery.id]);
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
    if (!this.options.serverSecret)
      throw new DomainError('service_unavailable', 'Webhooks need the server secret, which this process did not load.');
    return this.options.serverSecret;
  }

  private async checkUrl(url: string): Promise<void> {
    const problem = await checkWebhookDestination(url, this.allowPrivate, this.options.resolveHost);
    if (problem)
      throw new DomainError('validation_failed', `The webhook URL ${problem}.`, {
        errors: [{ field: 'url', message: problem }],
      });
  }

  async create(actor: Actor, raw: CreateWebhookInput): Promise<{ webhook: Webhook; secret: string }> {
    requireAdmin(actor);
    const input = CreateWebhookInput.parse(raw);
    await this.checkUrl(input.url);
    const secret = generateSecret(WEBHOOK_SECRET_PREFIX);
    const sealed = this.sealer().encrypt(WEBHOOK_SECRET_PURPOSE, secret);
    const hook = {
      id: newId(),
      accountId: actor.accountId,
      url: input.url,
      eventTypes: input.eventTypes,
      secretCiphertext: sealed,
      secretPrefix: secret.slice(0, WEBHOOK_SECRET_PREFIX.length + 6),
      enabled: input.enabled,
      createdAt: this.deps.clock.now(),
    };
    const webhook = await this.deps.transaction(async (trx) => {
      // Serialises concurrent creates of one account so the cap holds.
      await webhooks.lockAccountForWebhooks(trx, actor.accountId);
      const count = await webhooks.countWebhooks(trx, actor.accountId);
      if (count >= MAX_WEBHOOKS_PER_ACCOUNT)
        throw new DomainError('conflict', `An account can have at most ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks.`);
      return webhooks.insertWebhook(trx, hook);
    });
    return { webhook, secret };
  }

  async list(actor: Actor): Promise<Webhook[]> {
    return webhooks.listWebhooks(this.deps.knex, actor.accountId);
  }

  async get(actor: Actor, id: string): Promise<Webhook> {
    if (!isUuid(id)) throw notFound('Webhook');
    const webhook = await webhooks.findWebhook(this.deps.knex, { id, accountId: actor.accountId });
    if (!webhook) throw notFound('Webhook');
    return webhook;
  }

  /** Change url, types or enabled; enabling clears the reason it was disabled and its failure run. */
  async update(actor: Actor, id: string, raw: UpdateWebhookInput): Promise<Webhook> {
    requireAdmin(actor);
    const input = UpdateWebhookInput.parse(raw);
    if (input.url !== undefined) await this.checkUrl(input.url);
    const current = await this.get(actor, id);
    if (input.url === undefined && input.eventTypes === undefined && input.enabled === undefined) return current;
    const updated = await webhooks.updateWebhook(this.deps.knex, {
      id,
      accountId: actor.accountId,
      patch: {
        url: input.url,
        eventTypes: input.eventTypes,
        enabled: input.enabled,
        ...(input.enabled === undefined ? {} : { disabledReason: input.enabled ? null : 'disabled by a user' }),
        ...(input.enabled ? { failingSince: null } : {}),
      },
    });
    if (!updated) throw notFound('Webhook');
    return updated;
  }

  /** Deletes the endpoint with its deliveries (and their pending retries). */
  async delete(actor: Actor, id: string): Promise<Webhook> {
    requireAdmin(actor);
    if (!isUuid(id)) throw notFound('Webhook');
    const deleted = await webhooks.deleteWebhook(this.deps.knex, { id, accountId: actor.accountId });
    if (!deleted) throw notFound('Webhook');
    return deleted;
  }

  /** The delivery log of one endpoint, newest event first, with every attempt. */
  async deliveries(
    actor: Actor,
    webhookId: string,
    raw: ListDeliveriesInput = {},
  ): Promise<{ deliveries: WebhookDelivery[]; cursors: string[]; nextCursor: string | null }> {
    const input = ListDeliveriesInput.parse(raw);
    await this.get(actor, webhookId);
    const found = await deliveries.listDeliveries(this.deps.knex, {
      webhookId,
      accountId: actor.accountId,
      limit: input.first + 1,
      status: input.status ?? null,
      after: input.after ? decodeCursor(input.after) : null,
    });
    const { items, cursors, nextCursor } = keysetPage(found, input.first, encodeCursor);
    return { deliveries: await this.present(items), cursors, nextCursor };
  }

  async delivery(actor: Actor, id: string): Promise<WebhookDelivery> {
    if (!isUuid(id)) throw notFound('Delivery');
    const found = await deliveries.findDelivery(this.deps.knex, { id, accountId: actor.accountId });
    if (!found) throw notFound('Delivery');
    return (await this.present([found]))[0]!;
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
      const key = { id: deliveryId, accountId: actor.accountId };
      const seq = await deliveries.deliveryEventSeq(trx, key);
      if (seq === null) throw notFound('Delivery');
      // The event first, then the delivery: the retention pass locks in the same order, so a
      // redelivery either keeps the event alive or finds it gone, never a pending delivery without one.
      if (!(await deliveries.shareLockEvent(trx, seq))) {
        throw new DomainError(
          'invalid_state',
          'The event of this delivery is past its retention (EVENT_RETENTION_DAYS) and can no longer be sent.',
        );
      }
      const current = await deliveries.lockDelivery(trx, key);
      if (!current || (options.webhookId !== undefined && current.webhookId !== options.webhookId))
        throw notFound('Delivery');
      if (!(await webhooks.isWebhookEnabled(trx, current.webhookId)))
        throw new DomainError('invalid_state', 'The webhook is disabled; enable it before redelivering.');
      const next = redelivered(current, now);
      await deliveries.requeueDelivery(trx, {
        id: deliveryId,
        nextAttemptAt: next.nextAttemptAt,
        createdAt: next.createdAt,
      });
    });
    return this.delivery(actor, deliveryId);
  }

  private async present(page: DeliveryRecord[]): Promise<WebhookDelivery[]> {
    if (page.length === 0) return [];
    const [events, attempts] = await Promise.all([
      deliveries.eventBodiesOf(this.deps.knex, [...new Set(page.map((d) => d.eventId))]),
      deliveries.attemptsOf(
        this.deps.knex,
        page.map((d) => d.id),
      ),
    ]);
    const eventById = new Map(events.map((e) => [e.id, e]));
    return page.map((d) =>
      toDelivery(
        d,
        eventById.get(d.eventId) ?? {
          id: d.eventId,
          type: 'unknown',
          occurred_at: d.createdAt.toISOString(),
          data: {},
        },
        attempts.get(d.id) ?? [],
      ),
    );
  }
}
