import { expect } from 'vitest';
import type { Knex } from 'knex';
import { newId } from '#core/shared/ids';
import { versionKey } from '#core/shared/version';
import type { TestAccount, TestServer } from './test-server';

/**
 * Test factories (Outline's `buildDocument(overrides)` style). Devices are claimed through the
 * real API; what only a device can produce (heartbeats: firmware, ip, status) is written with
 * one bulk UPDATE, because the broker owns that path and these tests are about the REST side.
 */

/** `PREFIX-0001` ... zero-padded so that serial order is numeric order. */
export function serials(prefix: string, count: number, start = 1): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}-${String(start + i).padStart(4, '0')}`);
}

export async function buildModel(account: TestAccount, name = 'LX-200', description = ''): Promise<string> {
  const res = await account.api.post('/api/v1/models', { name, description });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return name;
}

/** A firmware version row for a model (the upload API belongs to the firmware area). */
export async function buildFirmwareVersion(
  server: TestServer,
  input: { accountId: string; model: string; version: string },
): Promise<string> {
  const knex = server.service.database.knex;
  const model = await knex('models')
    .where({ account_id: input.accountId, name: input.model })
    .first<{ id: string }>('id');
  return insertFirmwareVersion(knex, { accountId: input.accountId, modelId: model.id, version: input.version });
}

/** The same row written with a database handle alone (tests of statements, without a server). */
export async function insertFirmwareVersion(
  knex: Knex,
  input: { accountId: string; modelId: string; version: string },
): Promise<string> {
  const id = newId();
  await knex('firmware_versions').insert({
    id,
    account_id: input.accountId,
    model_id: input.modelId,
    version: input.version,
    version_key: versionKey(input.version),
    size: 1024,
    sha256: '0'.repeat(64),
  });
  return id;
}

/** Claims through POST /api/v1/devices/claim and expects success; returns the response body. */
export async function claimDevices(
  account: TestAccount,
  input: {
    serials: string[];
    model: string;
    firmware?: string;
    names?: Record<string, string>;
    csrs?: Record<string, string>;
  },
  // Test bodies are asserted field by field.
): Promise<any> {
  const res = await account.api.post('/api/v1/devices/claim', input);
  expect(res.status, JSON.stringify(res.body).slice(0, 500)).toBe(201);
  return res.body;
}

export interface ReportedState {
  firmware?: string | null;
  status?: 'online' | 'offline' | 'updating';
  ip?: string | null;
  lastSeen?: Date | null;
}

/** What heartbeats would have written, for many devices in one statement. */
export async function setReported(
  knex: Knex,
  input: { accountId: string; serials: string[]; state: ReportedState },
): Promise<void> {
  const patch: Record<string, unknown> = {};
  const { state } = input;
  if (state.firmware !== undefined) {
    patch.firmware = state.firmware;
    patch.firmware_key = state.firmware === null ? null : versionKey(state.firmware);
  }
  if (state.status !== undefined) {
    patch.status = state.status;
    patch.connectivity = state.status === 'offline' ? 'offline' : 'online';
  }
  if (state.ip !== undefined) patch.ip = state.ip;
  // A heartbeat moves both clocks: last_seen (shown) and heard_at (presence).
  if (state.lastSeen !== undefined) patch.last_seen = patch.heard_at = state.lastSeen;
  await knex('devices')
    .where({ account_id: input.accountId })
    .whereRaw('serial = ANY(?)', [input.serials])
    .update(patch);
}
