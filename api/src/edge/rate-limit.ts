import type { RateDecision, RateLimiter } from '#core/rate-limit/rate-limiter';
import type { Caller } from './caller';

/** A charge against an API key's requests per minute: what every surface answers with. */
export interface RateCharge {
  allowed: boolean;
  /** RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset (lowercase: HTTP names are case-insensitive, Apollo's header map wants them so). */
  headers: Array<[string, string]>;
  /** Retry-After of a refusal (seconds, at least 1). */
  retryAfterSeconds: number;
  /** The refusal's message. */
  message: string;
}

/**
 * Counts `units` requests against the caller's API key and decides: REST, GraphQL over HTTP and
 * graphql-ws all charge through here. Null for callers without a per-key limit (portal
 * sessions). A refusal is counted in the rate-limited metric.
 */
export class CallerRateLimit {
  constructor(
    private readonly limiter: RateLimiter,
    private readonly onRefused: () => void = () => undefined,
  ) {}

  async charge(caller: Pick<Caller, 'actor' | 'rateLimitPerMinute'>, units = 1): Promise<RateCharge | null> {
    const keyId = caller.actor.apiKeyId;
    if (caller.rateLimitPerMinute === undefined || !keyId) return null;
    const decision = await this.limiter.consume(keyId, caller.rateLimitPerMinute, units);
    if (!decision.allowed) this.onRefused();
    return rateCharge(decision);
  }
}

export function rateCharge(decision: RateDecision): RateCharge {
  return {
    allowed: decision.allowed,
    headers: [
      ['ratelimit-limit', String(decision.limit)],
      ['ratelimit-remaining', String(decision.remaining)],
      ['ratelimit-reset', String(decision.resetSeconds)],
    ],
    retryAfterSeconds: Math.max(1, Math.ceil(decision.resetSeconds)),
    message: `Rate limit of ${decision.limit} requests per minute exceeded.`,
  };
}
