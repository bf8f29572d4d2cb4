import type { Knex } from 'knex';
import type { Webhook } from '../webhook-types';
import type { Db } from '../../db/db';

interface WebhookRow {
  id: string;
  account_id: string;
  url: string;
  event_types: string[];
  secret_ciphertext: string;
  secret_prefix: string;
  enabled: boolean;
  disabled_reason: string | null;
  failing_since: Date | null;
  created_at: Date;
}

const toWebhook = (row: WebhookRow): Webhook => ({
  id: row.id,
  url: row.url,
  eventTypes: row.event_types,
  enabled: row.enabled,
  disabledReason: row.disabled_reason,
  failingSince: row.failing_since ? new Date(row.failing_since).toISOString() : null,
  secretPrefix: row.secret_prefix,
  createdAt: new Date(row.created_at).toISOString(),
});

/** Locks the account row: concurrent creates of one account run one after the other, so the cap holds. */
export async function lockAccountForWebhooks(trx: Knex.Transaction, accountId: string): Promise<void> {
  await trx('accounts').where({ id: accountId }).forUpdate().first('id');
}

export async function countWebhooks(db: Db, accountId: string): Promise<number> {
  return Number(
    (await db('webhooks').where({ account_id: accountId }).count<{ count: string }[]>('* as count'))[0]?.count ?? 0,
  );
}

export interface NewWebhook {
  id: string;
  accountId: string;
  url: string;
  eventTypes: string[];
  /** The signing secret sealed with the server key. */
  secretCiphertext: string;
  secretPrefix: string;
  enabled: boolean;
  createdAt: Date;
}

export async function insertWebhook(db: Db, hook: NewWebhook): Promise<Webhook> {
  const row: WebhookRow = {
    id: hook.id,
    account_id: hook.accountId,
    url: hook.url,
    event_types: hook.eventTypes,
    secret_ciphertext: hook.secretCiphertext,
    secret_prefix: hook.secretPrefix,
    enabled: hook.enabled,
    disabled_reason: null,
    failing_since: null,
    created_at: hook.createdAt,
  };
  await db('webhooks').insert(row);
  return toWebhook(row);
}

export async function listWebhooks(db: Db, accountId: string): Promise<Webhook[]> {
  const rows = (await db('webhooks').where({ account_id: accountId }).orderBy('created_at')) as WebhookRow[];
  return rows.map(toWebhook);
}

export async function findWebhook(db: Db, input: { id: string; accountId: string }): Promise<Webhook | null> {
  const row = (await db('webhooks').where({ id: input.id, account_id: input.accountId }).first()) as
    WebhookRow | undefined;
  return row ? toWebhook(row) : null;
}

export interface WebhookPatch {
  url?: string;
  eventTypes?: string[];
  enabled?: boolean;
  disabledReason?: string | null;
  /** Only ever cleared from here (a new failure run starts with the next failure). */
  failingSince?: null;
}

/** Null when the account has no such webhook. */
export async function updateWebhook(
  db: Db,
  input: { id: string; accountId: string; patch: WebhookPatch },
): Promise<Webhook | null> {
  const { patch } = input;
  const row: Record<string, unknown> = {};
  if (patch.url !== undefined) row.url = patch.url;
  if (patch.eventTypes !== undefined) row.event_types = patch.eventTypes;
  if (patch.enabled !== undefined) row.enabled = patch.enabled;
  if (patch.disabledReason !== undefined) row.disabled_reason = patch.disabledReason;
  if (patch.failingSince !== undefined) row.failing_since = patch.failingSince;
  const [updated] = (await db('webhooks')
    .where({ id: input.id, account_id: input.accountId })
    .update(row)
    .returning('*')) as WebhookRow[];
  return updated ? toWebhook(updated) : null;
}

/** Deletes the endpoint; its deliveries go with it (foreign key). Null when the account has no such webhook. */
export async function deleteWebhook(db: Db, input: { id: string; accountId: string }): Promise<Webhook | null> {
  const [row] = (await db('webhooks')
    .where({ id: input.id, account_id: input.accountId })
    .delete()
    .returning('*')) as WebhookRow[];
  return row ? toWebhook(row) : null;
}

/** An enabled endpoint of one of the accounts, with the event types it subscribed to. */
export interface Subscription {
  webhookId: string;
  accountId: string;
  eventTypes: string[];
}

export async function enabledSubscriptions(db: Db, accountIds: string[]): Promise<Subscription[]> {
  const rows = await db('webhooks')
    .whereIn('account_id', accountIds)
    .where({ enabled: true })
    .select<Array<Pick<WebhookRow, 'id' | 'account_id' | 'event_types'>>>('id', 'account_id', 'event_types');
  return rows.map((r) => ({ webhookId: r.id, accountId: r.account_id, eventTypes: r.event_types }));
}

/** Where and with what a delivery is sent; null when the endpoint was deleted meanwhile. */
export async function webhookTarget(db: Db, id: string): Promise<{ url: string; secretCiphertext: string } | null> {
  const row = await db('webhooks')
    .where({ id })
    .first<Pick<WebhookRow, 'url' | 'secret_ciphertext'> | undefined>('url', 'secret_ciphertext');
  return row ? { url: row.url, secretCiphertext: row.secret_ciphertext } : null;
}

/** Null when there is no such webhook. */
export async function isWebhookEnabled(db: Db, id: string): Promise<boolean | null> {
  const row = await db('webhooks').where({ id }).first<Pick<WebhookRow, 'enabled'> | undefined>('enabled');
  return row ? row.enabled : null;
}

/** A delivery went through: the endpoint's failure run (if any) is over. */
export async function endFailureRun(db: Db, id: string): Promise<void> {
  await db('webhooks').where({ id }).whereNotNull('failing_since').update({ failing_since: null });
}

/**
 * Since when every delivery to the endpoint failed (null: the last one went through), with
 * the endpoint row locked for the rest of the transaction; undefined when it was deleted.
 */
export async function lockFailureRun(
  trx: Knex.Transaction,
  id: string,
): Promise<{ failingSince: Date | null } | undefined> {
  const row = await trx('webhooks')
    .where({ id })
    .forUpdate()
    .first<Pick<WebhookRow, 'failing_since'> | undefined>('failing_since');
  return row ? { failingSince: row.failing_since ? new Date(row.failing_since) : null } : undefined;
}

/** Records the failure run; with `disabledReason`, the endpoint is disabled for it. */
export async function recordFailureRun(
  db: Db,
  input: { id: string; failingSince: Date; disabledReason: string | null },
): Promise<void> {
  const patch: Record<string, unknown> = { failing_since: input.failingSince };
  if (input.disabledReason !== null) {
    patch.enabled = false;
    patch.disabled_reason = input.disabledReason;
  }
  await db('webhooks').where({ id: input.id }).update(patch);
}
