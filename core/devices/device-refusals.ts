import type { FieldRefusalReason, HeartbeatField, RefusedField } from '#protocol/heartbeat-fields';

/**
 * What the service refused of a device's messages, kept per device since its claim so a firmware
 * team sees its mistakes in the API and the portal (not only in the logs and /metrics). Counted
 * in memory by the heartbeat ingest and written with its next batch (never a database write per
 * refused message), so the counts survive restarts and are the same whichever process answers.
 */

/**
 * Why a whole device message was dropped (stable strings: API values and metric labels):
 * - `topic_not_allowed`: a publish outside the device's own device-to-service topics (topic ACL);
 * - `too_large`: a payload above the size limit (a heartbeat still counts as heard);
 * - `not_json`, `not_object`: not a JSON object;
 * - `invalid`: a status, OTA progress, update lock or configuration report that fails its schema;
 * - `rate_limited`: above the device's message rate.
 */
export const MESSAGE_REFUSAL_REASONS = [
  'topic_not_allowed',
  'too_large',
  'not_json',
  'not_object',
  'invalid',
  'rate_limited',
] as const;
export type MessageRefusalReason = (typeof MESSAGE_REFUSAL_REASONS)[number];

/** Dropped messages by reason. */
export type MessageRefusalCounts = Partial<Record<MessageRefusalReason, number>>;

/** The last message dropped: why, on which topic (at most 200 characters), when (ISO 8601 UTC). */
export interface LastRefusedMessage {
  reason: MessageRefusalReason;
  topic: string;
  at: string;
}

/** Refusals of one heartbeat field: how many, and the last one's reason, value and time. */
export interface RefusedFieldSummary {
  count: number;
  reason: FieldRefusalReason;
  value: string;
  at: string;
}
export type RefusedFields = Partial<Record<HeartbeatField, RefusedFieldSummary>>;

/** Longest topic kept with a refusal (characters). */
export const MAX_REFUSED_TOPIC_LENGTH = 200;

/** Refusals heard since the last flush; null parts have no news. */
export interface PendingRefusals {
  messages: MessageRefusalCounts | null;
  lastMessage: LastRefusedMessage | null;
  fields: RefusedFields | null;
}

export function noPendingRefusals(): PendingRefusals {
  return { messages: null, lastMessage: null, fields: null };
}

export function addMessageRefusal(
  pending: PendingRefusals,
  input: { reason: MessageRefusalReason; topic: string; at: Date },
): void {
  const messages = (pending.messages ??= {});
  messages[input.reason] = (messages[input.reason] ?? 0) + 1;
  pending.lastMessage = {
    reason: input.reason,
    topic: input.topic.slice(0, MAX_REFUSED_TOPIC_LENGTH),
    at: input.at.toISOString(),
  };
}

export function addFieldRefusals(pending: PendingRefusals, refused: RefusedField[], at: Date): void {
  if (refused.length === 0) return;
  const fields = (pending.fields ??= {});
  const when = at.toISOString();
  for (const r of refused) {
    fields[r.field] = { count: (fields[r.field]?.count ?? 0) + 1, reason: r.reason, value: r.value, at: when };
  }
}

/** Two pending sets as one (a failed flush's rows under newer news): counts add, the newer last wins. */
export function mergePendingRefusals(older: PendingRefusals, newer: PendingRefusals): PendingRefusals {
  const merged: PendingRefusals = {
    messages: older.messages && newer.messages ? { ...older.messages } : (newer.messages ?? older.messages),
    lastMessage: newer.lastMessage ?? older.lastMessage,
    fields: older.fields && newer.fields ? { ...older.fields } : (newer.fields ?? older.fields),
  };
  if (older.messages && newer.messages)
    for (const [reason, n] of Object.entries(newer.messages) as Array<[MessageRefusalReason, number]>)
      merged.messages![reason] = (merged.messages![reason] ?? 0) + n;
  if (older.fields && newer.fields)
    for (const [field, s] of Object.entries(newer.fields) as Array<[HeartbeatField, RefusedFieldSummary]>)
      merged.fields![field] = { ...s, count: (merged.fields![field]?.count ?? 0) + s.count };
  return merged;
}
