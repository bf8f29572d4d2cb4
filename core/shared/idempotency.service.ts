import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import { requireRole, type Actor, type Role } from './actor';
import { DomainError } from './errors';
import { sha256Hex } from './secrets';
import type { ServerSecret } from './server-secret';
import {
  deleteStaleKey,
  findKey,
  findKeySince,
  insertDoneKey,
  tryHoldKey,
  type StoredKey,
} from './store/idempotency-keys.store';

const SEAL_PURPOSE = 'idempotent-responses';

/** Stored responses are replayed for 24 hours. */
export const KEY_TTL_MS = 24 * 60 * 60_000;

/**
 * The previous version stored an `in_progress` row before running a request. A process of that
 * version may still run during a rolling upgrade; its marker counts as running for this long
 * (longer than any claim takes), then as left behind by a crash.
 */
const LEGACY_MARKER_MS = 60_000;

const stillRunning = (): DomainError =>
  new DomainError('idempotency_key_in_use', 'The original request with this Idempotency-Key is still running.', {
    retryAfterSeconds: 1,
  });

export interface IdempotentRequest {
  actor: Actor;
  /** The client's Idempotency-Key (1 to 255 characters). */
  key: string;
  /** Names the operation, so one key cannot replay another operation's answer. */
  operation: string;
  /**
   * What the request addresses besides its body: REST's resolved path parameters (and query),
   * e.g. `{ params: { serial } }`; `{}` where the body is the whole request (GraphQL's input).
   * Part of the request a key is tied to, so one device's answer is never replayed for another.
   */
  target: RequestTarget;
  /** The validated request; another body with the same key is refused. */
  body: unknown;
  /**
   * The role the operation needs. Checked before the key is looked up: a stored answer may hold
   * secrets, and a caller who may not run the operation must not get its answer either.
   */
  requiredRole: Role;
}

/** REST's path and query parameters as the route's schemas parsed them (absent: none). */
export interface RequestTarget {
  params?: unknown;
  query?: unknown;
}

/** What is stored and replayed: the status and the JSON body the first request answered. */
export interface IdempotentResponse {
  status: number;
  body?: unknown;
}

export type IdempotentOutcome<R extends IdempotentResponse> =
  { kind: 'replayed'; status: number; body: unknown } | { kind: 'ran'; response: R };

/**
 * Idempotency-Key semantics (IETF draft, as Stripe does it), scoped per account: a retry with
 * the same key, operation, target (REST's path) and body replays the stored response; the same
 * key with another body, or on another path (another device), is 422;
 * a retry while the original is still running is 409. Keys are guessable, so a stored response
 * goes back only to the principal (API key or user) that made the first request; any other
 * principal of the account is refused with 422, as if the body differed.
 *
 * REST and GraphQL both go through `run`, the one place this sequence exists.
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

  /**
   * Runs `work` once per key, or replays what its first run answered. `work` does its writes in
   * the transaction it is given, and the answer is stored in that same transaction: the writes
   * and their stored answer commit together or not at all. While it runs, the key is held by a
   * transaction-level advisory lock rather than a stored marker, so a request that dies with its
   * process (or its connection) leaves nothing behind that would refuse its retry.
   */
  async run<R extends IdempotentResponse>(
    request: IdempotentRequest,
    work: (unitOfWork: Knex.Transaction) => Promise<R>,
  ): Promise<IdempotentOutcome<R>> {
    requireRole(request.actor, request.requiredRole);
    if (request.key.length < 1 || request.key.length > 255) {
      throw new DomainError('validation_failed', 'Idempotency-Key must be 1 to 255 characters.', {
        errors: [{ field: 'Idempotency-Key', message: 'must be 1 to 255 characters' }],
      });
    }
    const scope = { accountId: request.actor.accountId, key: request.key };
    const caller = { principal: request.actor.principal, requestHash: requestHash(request) };
    const now = this.deps.clock.now();
    const expired = new Date(now.getTime() - KEY_TTL_MS);

    // A finished request is answered without a transaction.
    const stored = await findKeySince(this.deps.knex, { ...scope, createdSince: expired });
    if (stored?.state === 'done') return this.replay(stored, caller);

    try {
      return await this.deps.transaction(async (trx) => {
        if (!(await tryHoldKey(trx, scope))) throw stillRunning();
        await deleteStaleKey(trx, {
          ...scope,
          expiredBefore: expired,
          markerBefore: new Date(now.getTime() - LEGACY_MARKER_MS),
        });
        // Read again under the lock: the first request may have committed since the read above.
        const row = await findKey(trx, scope);
        if (row) return this.replay(row, caller);
        const response = await work(trx);
        await insertDoneKey(trx, {
          ...scope,
          principal: caller.principal,
          operation: request.operation,
          requestHash: caller.requestHash,
          responseStatus: response.status,
          responseJson: JSON.stringify(this.seal(response.body ?? null)),
          createdAt: now,
        });
        return { kind: 'ran' as const, response };
      });
    } catch (error) {
      // A process of the previous version inserted its marker between our read and our insert.
      if (
        (error as { code?: string; constraint?: string }).code === '23505' &&
        (error as { constraint?: string }).constraint === 'idempotency_keys_pkey'
      ) {
        throw stillRunning();
      }
      throw error;
    }
  }

  private replay(row: StoredKey, request: { principal: string; requestHash: string }): IdempotentOutcome<never> {
    if (row.principal !== request.principal) {
      throw new DomainError(
        'idempotency_key_reused',
        'This Idempotency-Key was used by another API key or user of the account; choose a new key.',
      );
    }
    if (row.requestHash !== request.requestHash) {
      throw new DomainError('idempotency_key_reused', 'This Idempotency-Key was used with a different request.');
    }
    if (row.state !== 'done') throw stillRunning();
    return { kind: 'replayed', status: row.responseStatus, body: this.unseal(row.responseBody) };
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
}

/**
 * The request a key is tied to: operation, target (path and query parameters) and body. JSON text
 * has no raw line breaks, so the parts cannot run into each other. A request without a target
 * hashes as before the target was added (operation and body): rows stored by the previous
 * version for such operations (claims) keep replaying. Rows stored for an operation with a
 * target (a device's certificates) hold no target, so they match no request and are refused as
 * another request (422 `idempotency_key_reused`) until they expire: the previous version could
 * not tell which device they answered.
 */
function requestHash(request: Pick<IdempotentRequest, 'operation' | 'target' | 'body'>): string {
  const parts = [request.operation, JSON.stringify(request.body ?? null)];
  const target = Object.fromEntries(
    Object.entries(request.target).filter(([, value]) => value !== undefined && !isEmptyObject(value)),
  );
  if (Object.keys(target).length > 0) parts.push(JSON.stringify(target));
  return sha256Hex(parts.join('\n'));
}

const isEmptyObject = (value: unknown): boolean =>
  value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0;
