import { z } from 'zod';
import { createPublicKey, type KeyObject } from 'node:crypto';
import type { ServiceDeps } from '../service-deps';
import { requireAdmin, type Actor } from '../shared/actor';
import { parseSigningKey } from './firmware-signature';
import { lockAccount } from '../shared/store/account-lock.store';
import {
  currentSigningKey,
  listSigningKeys,
  retireSigningKey,
  saveCurrentSigningKey,
  type SigningKeyRecord,
} from './store/signing-keys.store';

export const RegisterSigningKeyInput = z.strictObject({
  // A PEM Ed25519 public key is about 113 characters; the bound only stops abuse.
  publicKey: z.string().min(1).max(4096),
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

const toSigningKey = (key: SigningKeyRecord): SigningKey => ({
  keyId: key.keyId,
  algorithm: 'ed25519',
  publicKey: key.publicKey,
  createdAt: key.createdAt.toISOString(),
  retiredAt: key.retiredAt ? key.retiredAt.toISOString() : null,
});

/**
 * Firmware signing keys per account. The service holds only public halves: the manufacturer
 * signs offline, uploads carry the signature, the service checks it and passes it on to devices.
 */
export class SigningKeyService {
  constructor(private readonly deps: ServiceDeps) {}

  /** Any role may read: a public key is no secret, and viewers see every settings page. */
  async get(actor: Actor): Promise<SigningKeys> {
    const keys = await listSigningKeys(this.deps.knex, actor.accountId);
    const current = keys.find((k) => k.retiredAt === null);
    return {
      current: current ? toSigningKey(current) : null,
      retired: keys.filter((k) => k.retiredAt !== null).map(toSigningKey),
    };
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
    const parsed = parseSigningKey(input.publicKey);
    await this.deps.transaction(async (trx) => {
      // Registrations of one account one at a time: two racing ones must not both stay current.
      await lockAccount(trx, actor.accountId);
      const current = await currentSigningKey(trx, actor.accountId);
      if (current?.keyId === parsed.keyId) return;
      const now = this.deps.clock.now();
      if (current) await retireSigningKey(trx, { accountId: actor.accountId, keyId: current.keyId, at: now });
      await saveCurrentSigningKey(trx, {
        accountId: actor.accountId,
        keyId: parsed.keyId,
        publicKey: parsed.pem,
        at: now,
      });
    });
    return this.get(actor);
  }

  /** The key uploads of the account must be signed with now, or null (uploads stay unsigned). */
  async currentKey(input: { accountId: string }): Promise<{ keyId: string; key: KeyObject } | null> {
    const current = await currentSigningKey(this.deps.knex, input.accountId);
    return current ? { keyId: current.keyId, key: createPublicKey(current.publicKey) } : null;
  }
}
