/**
 * When a device tries to connect again: the policy docs/device-protocol.md ("Reconnecting")
 * asks of every module, written the way firmware would hold it. Every wait is drawn at random
 * ("full jitter"), so a fleet that lost the service at the same instant comes back spread out
 * instead of all at once.
 */
export interface ReconnectPolicy {
  /** After a connection that was up is lost: the first try comes uniformly within [min, max] seconds. */
  afterLossS: { min: number; max: number };
  /** No CONNACK (refused, reset, timed out, TLS failed) or CONNACK 3: uniformly within [1 s, min(cap, base x 2^n)]. */
  unavailable: { baseS: number; capS: number };
  /** CONNACK 1, 2, 4 (once the other secret it holds was tried) or 5: the same, with its own base and cap. */
  refused: { baseS: number; capS: number };
  /** A connection that stayed up this long starts the count n at zero again. */
  stableAfterS: number;
}

/** The documented policy: 100,000 devices that lost a restarting service come back at about 5,000 a second. */
export const DEVICE_RECONNECT_POLICY: ReconnectPolicy = {
  afterLossS: { min: 1, max: 20 },
  unavailable: { baseS: 5, capS: 300 },
  refused: { baseS: 60, capS: 3600 },
  stableAfterS: 60,
};

/** The same policy with every wait multiplied by `factor` (tests and benchmarks that restart a service in seconds). */
export function scaledReconnectPolicy(
  factor: number,
  policy: ReconnectPolicy = DEVICE_RECONNECT_POLICY,
): ReconnectPolicy {
  return {
    afterLossS: { min: policy.afterLossS.min * factor, max: policy.afterLossS.max * factor },
    unavailable: { baseS: policy.unavailable.baseS * factor, capS: policy.unavailable.capS * factor },
    refused: { baseS: policy.refused.baseS * factor, capS: policy.refused.capS * factor },
    stableAfterS: policy.stableAfterS * factor,
  };
}

/** What ended the last try: a connection that was up and is gone, or an attempt that got no session. */
export type ConnectOutcome = { kind: 'lost'; upForS: number } | { kind: 'failed'; connackCode: number | undefined };

/** The wait before the next try, and the count of failed tries in a row that it grows with. */
export class ReconnectBackoff {
  private failures = 0;

  constructor(
    private readonly policy: ReconnectPolicy,
    private readonly random: () => number = Math.random,
  ) {}

  /** Milliseconds to wait before trying again after `outcome`. */
  next(outcome: ConnectOutcome): number {
    if (outcome.kind === 'lost') {
      if (outcome.upForS >= this.policy.stableAfterS) this.failures = 0;
      const { min, max } = this.policy.afterLossS;
      return Math.round((min + this.random() * (max - min)) * 1000);
    }
    const n = this.failures++;
    const refusedByService = outcome.connackCode !== undefined && outcome.connackCode !== 3;
    const { baseS, capS } = refusedByService ? this.policy.refused : this.policy.unavailable;
    const ceiling = Math.min(capS, baseS * 2 ** Math.min(n, 30));
    const floor = Math.min(1, ceiling);
    return Math.round((floor + this.random() * (ceiling - floor)) * 1000);
  }
}
