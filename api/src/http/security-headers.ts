import type { IncomingMessage, ServerResponse } from 'node:http';
import helmet from 'helmet';

/** A Host header we are willing to repeat in a header: name or IP literal, optional port. */
const PLAIN_HOST = /^(?:[a-z0-9.-]{1,253}|\[[0-9a-f:.]{2,45}\])(?::\d{1,5})?$/i;

/**
 * The portal's graphql-ws socket (ws: or wss: on its own origin). CSP level 3 lets 'self'
 * cover it, but older engines (Safari before 15.4) only match ws: against explicit sources.
 */
function sameOriginSockets(req: IncomingMessage, _res: ServerResponse): string {
  const host = req.headers.host ?? '';
  return PLAIN_HOST.test(host) ? `ws://${host} wss://${host}` : '';
}

/**
 * Response headers for every answer of the HTTP port (portal, API, GraphQL, downloads, probes),
 * through helmet. The Content-Security-Policy is the one the built portal works under:
 * - scripts only from our origin (vite emits external module scripts, no inline ones, no eval);
 * - styles also inline: naive-ui injects <style> elements at runtime, echarts tooltips and
 *   index.html carry inline styles;
 * - images from our origin and data: URIs (the favicon), so release notes cannot load remote
 *   images (no tracking pixels in Markdown);
 * - connections to our origin only, GraphQL subscriptions included;
 * - never framed (frame-ancestors and X-Frame-Options for engines without CSP).
 * No upgrade-insecure-requests: the service is often reached over plain http on a LAN address,
 * where it would send every asset request to an https port that does not exist. No HSTS: that
 * belongs to whatever terminates TLS in front of the service.
 */
export function securityHeaders() {
  return helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        'default-src': ["'self'"],
        'base-uri': ["'self'"],
        'script-src': ["'self'"],
        'script-src-attr': ["'none'"],
        'style-src': ["'self'", "'unsafe-inline'"],
        'img-src': ["'self'", 'data:'],
        'font-src': ["'self'", 'data:'],
        'connect-src': ["'self'", sameOriginSockets],
        'object-src': ["'none'"],
        'form-action': ["'self'"],
        'frame-ancestors': ["'none'"],
      },
    },
    xFrameOptions: { action: 'deny' },
    referrerPolicy: { policy: 'no-referrer' },
    strictTransportSecurity: false,
  });
}
