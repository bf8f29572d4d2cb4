import { FLOOD_BURST, FLOOD_DISCONNECT_AFTER_DROPS, FLOOD_RATE_PER_S, FLOOD_WINDOW_S } from '#protocol/payloads';

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
