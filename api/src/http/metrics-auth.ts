import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request, Response, NextFunction } from 'express';
import { problem, sendProblem } from '../edge/problem';

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/**
 * Guards /metrics with METRICS_TOKEN (`Authorization: Bearer <token>`); without a token the
 * endpoint stays open, as Prometheus scrapers on a trusted network expect. Digests are compared
 * so neither the length nor a prefix of the token shows in the timing.
 */
export function metricsAuth(token: string | undefined) {
  const expected = token === undefined ? null : digest(token);
  return (req: Request, res: Response, next: NextFunction): void => {
    if (!expected) {
      next();
      return;
    }
    const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
    if (match && timingSafeEqual(digest(match[1]!), expected)) {
      next();
      return;
    }
    res.setHeader('WWW-Authenticate', 'Bearer realm="metrics"');
    sendProblem(res, problem('unauthenticated', 'Send the metrics token as "Authorization: Bearer <METRICS_TOKEN>".'));
  };
}
