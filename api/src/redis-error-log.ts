import type { Logger } from '#core/logger';

/** Redis errors of the broker's cluster backends: logged at most once a minute per source (ioredis reconnects). */
export function throttledRedisErrorLog(logger: Logger): (error: Error, what: string) => void {
  const last = new Map<string, number>();
  return (error, what) => {
    const now = Date.now();
    if (now - (last.get(what) ?? 0) < 60_000) return;
    last.set(what, now);
    logger.warn({ err: error, connection: what }, 'redis connection error (broker cluster backend)');
  };
}
