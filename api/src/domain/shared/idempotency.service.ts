import type { ServiceDeps } from '../service-deps';
import { DomainError } from './errors';
import { sha256Hex } from './secrets';
import type { ServerSecret } from './server-secret';

const SEAL_PURPOSE = 'idempotent-responses';

export type IdempotencyBegin =
  | { kind: 'proceed' }
  | { kind: 'replay'; status: number; body: unknown };

/** Stored responses are replayed for 24 hours. */
export const KEY_TTL_MS = 24 * 60 * 60_000;

/**
 * Idempotency-Key semantics (IETF draft, as Stripe does it), scoped per account: a retry with
 * the same key and body replays the stored response; the same key with another body is 422;
 * a retry while the original is still running is 409.
 */
export class IdempotencyService {
  /**
   * Stored responses can hold secrets shown once (a claim's device passwords): with a server
   * secret they are stored sealed (AES-256-GCM), never in plain text.
   */
  constructor(
    private readonly deps: ServiceDeps,
    private readonly serverSecret?: ServerSecret,
  ) {}

  async begin(input: { accountId: string; key: string; operation: string; body: unknown }): Promise<IdempotencyBegin> {
    if (input.key.length < 1 || input.key.length > 255) {
      throw new DomainError('validation_failed', 'Idempotency-Key must be 1 to 255 characters.', {
        errors: [{ field: 'Idempotency-Key', message: 'must be 1 to 255 characters' }],
      });
    }
    const requestHash = sha256Hex(`${input.operation}\n${JSON.stringify(input.body ?? null)}`);
    const now = this.deps.clock.now();
    await this.deps.knex('idempotency_keys')
      .where({ account_id: input.accountId, key: input.key })
      .where('created_at', '<', new Date(now.getTime() - KEY_TTL_MS))
      .delete();
    const inserted = await this.deps.knex('idempotency_keys')
      .insert({ account_id: input.accountId, key: input.key, operation: input.operation, request_hash: requestHash, state: 'in_progress', created_at: now })
      .onConflict(['account_id', 'key'])
      .ignore()
      .returning('key');
    if (inserted.length > 0) return { kind: 'proceed' };
    const row = (await this.deps.knex('idempotency_keys').where({ account_id: input.accountId, key: input.key }).first()) as
      | { request_hash: string; state: string; response_status: number; response_body: unknown }
      | undefined;
    if (!row) return this.begin(input);
    if (row.request_hash !== requestHash) {
      throw new DomainError('idempotency_key_reused', 'This Idempotency-Key was used with a different request.');
    }
    if (row.state !== 'done') {
      throw new DomainError('idempotency_key_in_use', 'The original request with this Idempotency-Key is still running.', {
        retryAfterSeconds: 1,
      });
    }
    return { kind: 'replay', status: row.response_status, body: this.unseal(row.response_body) };
  }

  async complete(input: { accountId: string; key: string; status: number; body: unknown }): Promise<void> {
    await this.deps.knex('idempotency_keys')
      .where({ account_id: input.accountId, key: input.key })
      .update({ state: 'done', response_status: input.status, response_body: JSON.stringify(this.seal(input.body ?? null)) });
  }

  private seal(body: unknown): unknown {
    if (!this.serverSecret) return body;
    return { sealed: this.serverSecret.encrypt(SEAL_PURPOSE, JSON.stringify(body)) };
  }

  private unseal(stored: unknown): unknown {
    const sealed = (stored as { sealed?: unknown } | null)?.sealed;
    if (typeof sealed !== 'string' || !this.serverSecret) return stored;
    return JSON.parse(this.serverSecret.decrypt(SEAL_PURPOSE, sealed)) as unknown;
  }

  /** The request failed: forget the key so a corrected retry can run. */
  async abandon(input: { accountId: string; key: string }): Promise<void> {
    await this.deps.knex('idempotency_keys').where({ account_id: input.accountId, key: input.key, state: 'in_progress' }).delete();
  }
}
