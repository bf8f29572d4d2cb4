import { expect } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import type { TestAccount } from '../helpers/test-server';

/** Uploads a firmware binary through the multipart API; returns the record and the bytes. */
export async function uploadFirmware(
  account: TestAccount,
  input: { model: string; version: string; bytes?: Buffer; releaseNotes?: string; expectStatus?: number },
  // Test bodies are asserted field by field.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<{ status: number; body: any; bytes: Buffer }> {
  const bytes = input.bytes ?? randomBytes(4096);
  const form = new FormData();
  form.append('model', input.model);
  form.append('version', input.version);
  form.append('release_notes', input.releaseNotes ?? `Release ${input.version}`);
  form.append('changelog', `- changes in ${input.version}`);
  form.append('file', new Blob([new Uint8Array(bytes)]), `fw-${input.version}.bin`);
  const res = await account.api.request('POST', '/api/v1/firmware/versions', { rawBody: form });
  if (input.expectStatus !== undefined) expect(res.status, JSON.stringify(res.body)).toBe(input.expectStatus);
  return { status: res.status, body: res.body, bytes };
}

export const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
