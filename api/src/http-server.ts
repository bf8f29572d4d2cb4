import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import express from 'express';
import type { Knex } from 'knex';
import type { Config } from '#core/config';
import type { Logger } from '#core/logger';
import type { Metrics } from '#core/metrics';
import type { Services } from '#core/services';
import type { DatabaseHealth } from '#core/db/database-health';
import type { TlsCredentials } from './http/tls-credentials';
import type { CallerRateLimit } from './edge/rate-limit';
import { problem, problemErrorHandler, sendProblem } from './edge/problem';
import { securityHeaders } from './http/security-headers';
import { metricsAuth } from './http/metrics-auth';
import { firmwareDownloadRouter } from './http/firmware-download';
import { portalStatic } from './http/portal-static';
import { createRestRouter } from '#rest/router';
import { allRoutes } from '#rest/routes/index';
import type { DeviceEndpointsSource } from '#rest/routes/device-endpoints.routes';
import { openApiRoute } from '#rest/routes/openapi.routes';
import { LISTEN_BACKLOG } from '#core/listen-backlog';
import { listenFailure } from '#core/listen-errors';

/** How long a stopping service lets HTTP requests under way finish (ms). */
export const HTTP_DRAIN_MS = 5000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

export type UpgradeHandler = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void;
export type ReadinessCheck = () => Promise<{ ok: boolean; detail?: string }>;

export interface HttpServerDeps {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  services: Services;
  knex: Knex;
  databaseHealth: DatabaseHealth;
  rateLimit: CallerRateLimit;
  /** GraphQL over HTTP, mounted at /graphql. */
  graphql: express.Router;
  /** WebSocket upgrades by path: /graphql (graphql-ws), /mqtt (MQTT over WebSocket). */
  upgrades: Record<string, UpgradeHandler>;
  /** Named checks reported by /readyz beside the database's. */
  readiness: Record<string, ReadinessCheck>;
  /** With TLS this is HTTPS: REST, GraphQL (https and wss), the portal, downloads and MQTT over wss. */
  tls: TlsCredentials | null;
  /** The device-facing broker URLs (GET /api/v1/device-endpoints), known once the listeners are bound. */
  deviceEndpoints?: DeviceEndpointsSource;
}

/**
 * The HTTP server: health, readiness and metrics, REST under /api/v1, GraphQL at /graphql, the
 * device firmware downloads, the portal, and the one `upgrade` dispatcher for WebSockets.
 * Everything it serves is built before it and given to its constructor.
 */
export class HttpServer {
  readonly server: http.Server;
  private closed: Promise<void> | undefined;
  private bound: { port: number; url: string; publicHost: string } | undefined;

  constructor(private readonly deps: HttpServerDeps) {
    const { config, logger, metrics, services } = deps;
    const app = express();
    app.disable('x-powered-by');
    app.set('trust proxy', trustProxySetting(config.trustProxy));
    app.use(securityHeaders());

    app.get('/healthz', (_req, res) => {
      res.json({ status: 'ok' });
    });
    app.get('/readyz', async (_req, res) => {
      const checks: Record<string, { ok: boolean; detail?: string }> = {};
      try {
        await Promise.race([
          deps.knex.raw('select 1'),
          new Promise((_, reject) => setTimeout(() => reject(new Error('timed out after 1 s')), 1000).unref()),
        ]);
        checks.database = { ok: true };
      } catch (error) {
        checks.database = { ok: false, detail: (error as Error).message };
      }
      for (const [name, check] of Object.entries(deps.readiness))
        checks[name] = await check().catch((error: unknown) => ({
          ok: false,
          detail: error instanceof Error ? error.message : String(error),
        }));
      const ok = Object.values(checks).every((c) => c.ok);
      if (!ok) res.setHeader('Retry-After', '5');
      res.status(ok ? 200 : 503).json({ status: ok ? 'ready' : 'unavailable', checks });
    });
    app.get('/metrics', metricsAuth(config.metricsToken), async (_req, res) => {
      res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
    });

    const routes = allRoutes(services, deps.deviceEndpoints);
    routes.push(openApiRoute(routes));
    // While the database is down, API requests get 503 + Retry-After at once instead of hanging.
    app.use(['/api/v1', '/graphql'], (_req, res, next) => {
      if (deps.databaseHealth.isUp()) {
        next();
        return;
      }
      sendProblem(res, problem('service_unavailable', 'The database is unavailable; try again shortly.'), 5);
    });
    app.use(
      '/api/v1',
      createRestRouter(routes, {
        apiKeys: services.apiKeys,
        users: services.users,
        idempotency: services.idempotency,
        rateLimit: deps.rateLimit,
        metrics,
        logger,
        maxJsonBodyBytes: config.maxJsonBodyBytes,
      }),
    );
    app.use('/graphql', deps.graphql);
    // Firmware downloads for devices: signed links, no API key (api/src/http/firmware-download.ts).
    app.use(
      firmwareDownloadRouter({
        downloads: services.firmwareDownloads,
        storage: services.firmwareStorage,
        logger,
        onBytes: (n) => metrics.firmwareDownloadBytes.inc(n),
      }),
    );
    // The portal (after /api/v1 and /graphql): static build with SPA fallback for deep links.
    app.use(portalStatic());
    app.use((req, res) => sendProblem(res, problem('not_found', `No route ${req.method} ${req.path}.`)));
    // Whatever escapes a router (a path segment Express cannot decode, ...) is problem+json too.
    app.use(problemErrorHandler(logger));

    if (deps.tls) {
      const server = https.createServer(deps.tls.serverOptions(), app);
      deps.tls.attach(server);
      server.on('tlsClientError', (err) => logger.debug({ err: err.message }, 'HTTPS handshake failed'));
      this.server = server;
    } else this.server = http.createServer(app);
    const upgrades = new Map(Object.entries(deps.upgrades));
    // An 'upgrade' listener runs outside Express: whatever it throws would end the process, so
    // the request target is parsed without throwing and a handler's throw closes only its socket.
    this.server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on('error', (error) => logger.debug({ err: error }, 'upgrade socket error'));
      const path = upgradePath(req.url);
      if (path === null) {
        refuseUpgrade(socket, '400 Bad Request');
        return;
      }
      const handler = upgrades.get(path);
      if (!handler) {
        refuseUpgrade(socket, '404 Not Found');
        return;
      }
      try {
        handler(req, socket, head);
      } catch (error) {
        logger.warn({ err: error, path }, 'WebSocket upgrade failed');
        socket.destroy();
      }
    });
  }

  /** Binds PORT on HOST; the URL is PUBLIC_URL's host when the bound address is a wildcard. */
  async listen(): Promise<{ port: number; url: string; publicHost: string }> {
    const { config } = this.deps;
    await listen(this.server, config.port, config.host, 'HTTP', 'PORT');
    const port = (this.server.address() as AddressInfo).port;
    const publicHost = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
    this.bound = { port, url: `${this.deps.tls ? 'https' : 'http'}://${publicHost}:${port}`, publicHost };
    return this.bound;
  }

  get address(): { port: number; url: string; publicHost: string } {
    if (!this.bound) throw new Error('the HTTP server is not listening');
    return this.bound;
  }

  /** No new connections from here; idle kept-alive ones are closed, requests under way go on. */
  stopAccepting(): void {
    this.closed ??= new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
  }

  /**
   * Requests under way (a firmware download to a slow device, say) get `ms` to finish before
   * their connections are closed.
   */
  async drain(ms = HTTP_DRAIN_MS): Promise<void> {
    this.stopAccepting();
    const drained = await Promise.race([this.closed!.then(() => true), sleep(ms).then(() => false)]);
    if (!drained)
      this.deps.logger.warn({ afterMs: ms }, 'HTTP requests still running at shutdown; closing their connections');
    this.server.closeAllConnections();
    await this.closed;
  }
}

/**
 * Answers an upgrade request nobody takes and closes its socket once the answer is written. An
 * upgraded socket is paused and nothing reads it: after `end()` alone it never saw the client's
 * FIN, stayed half-open and kept its descriptor for good (the fuzz suite counted 8 leaked in 50
 * upgrade requests).
 */
function refuseUpgrade(socket: Duplex, status: string): void {
  socket.once('finish', () => socket.destroy());
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}

/**
 * The path of an upgrade request's target, or null when it is no URL path at all (`//[`, say,
 * which `new URL` refuses by throwing).
 */
export function upgradePath(target: string | undefined): string | null {
  const base = 'http://localhost';
  const raw = target ?? '/';
  return URL.canParse(raw, base) ? new URL(raw, base).pathname : null;
}

/**
 * TRUST_PROXY as Express reads it: `true`/`false`, a hop count, or a list of addresses, CIDR
 * ranges and the names `loopback`, `linklocal`, `uniquelocal`.
 */
function trustProxySetting(value: string): boolean | number | string[] {
  if (value === 'true' || value === 'false') return value === 'true';
  if (/^\d+$/.test(value)) return Number(value);
  return value
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean);
}

/** Listen, turning "port taken" or a bad HOST into a message that names the setting to change. */
export function listen(
  server: { listen: http.Server['listen']; once: http.Server['once']; off: http.Server['off'] },
  port: number,
  host: string,
  what: string,
  setting: string,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => reject(listenFailure(error, { what, port, host, setting }));
    server.once('error', onError);
    server.listen(port, host, LISTEN_BACKLOG, () => {
      server.off('error', onError);
      resolve();
    });
  });
}
