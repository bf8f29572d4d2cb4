import {
  FLOOD_BURST,
  FLOOD_DISCONNECT_AFTER_DROPS,
  FLOOD_RATE_PER_S,
  FLOOD_WINDOW_S,
  REFUSED_PUBLISH_LIMIT,
  REFUSED_PUBLISH_WINDOW_S,
} from '#protocol/payloads';

/**
 * Per-connection token bucket (documented in docs/device-protocol.md): FLOOD_RATE_PER_S
 * messages per second sustained with a burst of FLOOD_BURST. Messages above it are dropped;
 * FLOOD_DISCONNECT_AFTER_DROPS drops within FLOOD_WINDOW_S mean sustained abuse: disconnect.
 * Real time on purpose (performance.now): this protects the process, not a business rule.
 */
export class FloodGuard {
  private tokens = FLOOD_BURST;
  private last = performance.now();
  private drops = 0;
  private windowStart = this.last;

  /** 'ok' to process, 'drop' to drop, 'disconnect' when the device keeps flooding. */
  take(): 'ok' | 'drop' | 'disconnect' {
    const now = performance.now();
    this.tokens = Math.min(FLOOD_BURST, this.tokens + ((now - this.last) / 1000) * FLOOD_RATE_PER_S);
    this.last = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return 'ok';
    }
    if (now - this.windowStart > FLOOD_WINDOW_S * 1000) {
      this.windowStart = now;
      this.drops = 0;
    }
    this.drops += 1;
    return this.drops >= FLOOD_DISCONNECT_AFTER_DROPS ? 'disconnect' : 'drop';
  }
}

/**
 * Per-connection limit of publishes the topic ACL refuses (documented in docs/device-protocol.md):
 * each one is acknowledged and dropped, and the connection closes only when one more than
 * REFUSED_PUBLISH_LIMIT arrive within REFUSED_PUBLISH_WINDOW_S (a sliding window over the times
 * of the last REFUSED_PUBLISH_LIMIT refusals). A firmware with one wrong topic stays connected;
 * one that keeps trying other devices' topics does not. Real time, as FloodGuard.
 */
export class RefusedPublishGuard {
  /** Times (ms) of the last REFUSED_PUBLISH_LIMIT refusals, oldest at `next` once full. */
  private readonly times: number[] = [];
  private next = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** 'ok' to acknowledge and drop; 'close' when this refusal is one too many within the window. */
  take(): 'ok' | 'close' {
    const now = this.now();
    if (this.times.length < REFUSED_PUBLISH_LIMIT) {
      this.times.push(now);
      return 'ok';
    }
    const oldest = this.times[this.next]!;
    this.times[this.next] = now;
    this.next = (this.next + 1) % REFUSED_PUBLISH_LIMIT;
    return now - oldest < REFUSED_PUBLISH_WINDOW_S * 1000 ? 'close' : 'ok';
  }
}
