import { z } from 'zod';
import { createPublicKey, type KeyObject } from 'node:crypto';
import type { ServiceDeps } from '../service-deps';
import { requireAdmin, type Actor } from '../shared/actor';
import { parseSigningKey } from './firmware-signature';

export const RegisterSigningKeyInput = z.strictObject({
  // A PEM Ed25519 public key is about 113 characters; the bound only stops abuse.
  public_key: z.string().min(1).max(4096),
});
export type RegisterSigningKeyInput = z.input<typeof RegisterSigningKeyInput>;

export interface SigningKey {
  /** First 16 hex digits of SHA-256 over the SPKI DER (docs/signed-firmware.md). */
  keyId: string;
  algorithm: 'ed25519';
  /** PEM (SPKI). */
  publicKey: string;
  createdAt: string;
  /** When another key replaced it; null for the current key. */
  retiredAt: string | null;
}

/** The account's current key (null before one is registered) and the ones it replaced, newest first. */
export interface SigningKeys {
  current: SigningKey | null;
  retired: SigningKey[];
}

interface SigningKeyRow {
  account_id: string;
  id: string;
  public_key: string;
  created_at: Date;
  retired_at: Date | null;
}

const toSigningKey = (row: SigningKeyRow): SigningKey => ({
  keyId: row.id,
  algorithm: 'ed25519',
  publicKey: row.public_key,
  createdAt: new Date(row.created_at).toISOString(),
  retiredAt: row.retired_at ? new Date(row.retired_at).toISOString() : null,
});

/**
 * Firmware signing keys per account. The service holds only public halves: the manufacturer
 * signs offline, uploads carry the signature, the service checks it and passes it on to devices.
 */
export class SigningKeyService {
  constructor(private readonly deps: ServiceDeps) {}

  /** Any role may read: a public key is no secret, and viewers see every settings page. */
  async get(actor: Actor): Promise<SigningKeys> {
    const rows = (await this.deps
      .knex('firmware_signing_keys')
      .where({ account_id: actor.accountId })
      .orderByRaw('retired_at DESC NULLS FIRST')
      .orderBy('created_at', 'desc')) as SigningKeyRow[];
    const current = rows.find((r) => r.retired_at === null);
    return { current: current ? toSigningKey(current) : null, retired: rows.filter((r) => r.retired_at !== null).map(toSigningKey) };
  }

  /**
   * Makes the key current (admin). The key it replaces is retired, not deleted: versions signed
   * with it stay valid and keep naming it. Registering the current key again changes nothing;
   * registering a retired one makes it current again. 422 `invalid_signing_key` for anything
   * but a PEM SPKI Ed25519 public key.
   */
  async register(actor: Actor, raw: RegisterSigningKeyInput): Promise<SigningKeys> {
    requireAdmin(actor);
    const input = RegisterSigningKeyInput.parse(raw);
    const parsed = parseSigningKey(input.public_key);
    await this.deps.transaction(async (trx) => {
      // Registrations of one account one at a time: two racing ones must not both stay current.
      await trx('accounts').where({ id: actor.accountId }).forUpdate().first('id');
      const current = (await trx('firmware_signing_keys').where({ account_id: actor.accountId }).whereNull('retired_at').first('id')) as { id: string } | undefined;
      if (current?.id === parsed.keyId) return;
      const now = this.deps.clock.now();
      if (current) await trx('firmware_signing_keys').where({ account_id: actor.accountId, id: current.id }).update({ retired_at: now });
      await trx('firmware_signing_keys')
        .insert({ account_id: actor.accountId, id: parsed.keyId, public_key: parsed.pem, created_at: now, retired_at: null })
        .onConflict(['account_id', 'id'])
        .merge({ retired_at: null });
    });
    return this.get(actor);
  }

  /** The key uploads of the account must be signed with now, or null (uploads stay unsigned). */
  async currentKey(input: { accountId: string }): Promise<{ keyId: string; key: KeyObject } | null> {
    const row = (await this.deps.knex('firmware_signing_keys').where({ account_id: input.accountId }).whereNull('retired_at').first('id', 'public_key')) as
      | { id: string; public_key: string }
      | undefined;
    return row ? { keyId: row.id, key: createPublicKey(row.public_key) } : null;
  }
}
