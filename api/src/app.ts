import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { Duplex } from 'node:stream';
import { createGraphQL } from './graphql/server';
import { loadServerSecret } from './domain/shared/server-secret';
import { fanOutWebhookDeliveries } from './domain/webhooks/webhook-fanout';
import { WebhookDeliveryWorker } from './domain/webhooks/delivery-worker';
import { RetentionWorker } from './domain/housekeeping/retention-worker';
import { ADVISORY_LOCKS, withAdvisoryLock } from './db/advisory-lock';
import { tlsFiles, type Config } from './config';
import { TlsCredentials } from './http/tls-credentials';
import { createLogger, type Logger } from './logger';
import { openDatabase, type Database } from './db/database';
import { createTransactionRunner } from './db/transaction';
import { systemClock, type Clock } from './domain/shared/clock';
import { createServices, type Services } from './services';
import { firmwareDownloadRouter } from './http/firmware-download';
import { createMetrics, type Metrics } from './metrics';
import { InProcessEventBus, type EventBus } from './events/event-bus';
import { OutboxDispatcher } from './events/outbox';
import { FlexibleRateLimiter, type RateLimiter } from './rate-limit/rate-limiter';
import { createRedisRateLimiter } from './rate-limit/redis-rate-limiter';
import { RedisEventBus } from './events/redis-event-bus';
import { createClusterConnections } from './cluster/cluster-connections';
import { RedisDisconnectRequests } from './cluster/redis-disconnect-requests';
import { redisHealthy } from './cluster/redis-connection';
import { createRestRouter } from '../../rest-facade/src/router';
import { allRoutes } from '../../rest-facade/src/routes/index';
import { openApiRoute } from '../../rest-facade/src/routes/openapi.routes';
import { problem, problemErrorHandler, sendProblem } from './edge/problem';
import { CallerRateLimit } from './edge/rate-limit';
import { seedDemoAccount, type DemoAccount } from './demo-seed';
import { DatabaseHealth } from './db/database-health';
import { DeviceBroker } from '../../broker/src/create-broker';
import { createClusterBrokerBackends } from '../../broker/src/cluster/aedes-cluster';
import { portalStatic } from './http/portal-static';
import { securityHeaders } from './http/security-headers';
import { metricsAuth } from './http/metrics-auth';
import type { HostResolver } from './domain/webhooks/url-guard';
import { LISTEN_BACKLOG } from './listen-backlog';

/** How long a stopping service lets HTTP requests under way finish (ms). */
export const HTTP_DRAIN_MS = 5000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

export interface StartOptions {
  config: Config;
  clock?: Clock;
  logger?: Logger;
  /** Use this database instead of opening one from the config (tests that restart share it). */
  database?: Database;
  /** DNS for the creation check of webhook receiver names (tests pin answers). Default: the system resolver. */
  resolveHost?: HostResolver;
}

/** A running service: what main.ts prints and what tests talk to. */
export interface FleetService {
  readonly httpUrl: string;
  readonly httpPort: number;
  /** mqtt://host:port of the device broker (set once the broker is wired in). */
  readonly mqttUrl: string | null;
  /** null with MQTT_PORT=off. */
  readonly mqttPort: number | null;
  /** mqtts://host:port when TLS is configured, else null. */
  readonly mqttsUrl: string | null;
  readonly mqttsPort: number | null;
  /** The service's certificate (PEM) when TLS is configured: what a client adds to its trust store for a self-signed one. */
  readonly tlsCertificate: string | null;
  /** The embedded device broker (presence sweep and flush are reachable for tests and benchmarks). */
  readonly broker: DeviceBroker;
  readonly services: Services;
  readonly database: Database;
  readonly metrics: Metrics;
  readonly bus: EventBus;
  readonly outbox: OutboxDispatcher;
  /** Sends webhook deliveries (tests call `settle()` after moving the clock). */
  readonly webhookWorker: WebhookDeliveryWorker;
  /** Deletes history and events past their retention (tests call `runNow()` for one pass now). */
  readonly retentionWorker: RetentionWorker;
  readonly logger: Logger;
  readonly clock: Clock;
  /** The demo account when this start created it, or when an earlier start created it and it was never used. */
  readonly demo: DemoAccount | null;
  /** Stop accepting, finish in-flight work, flush, close the database (unless it was passed in). */
  stop(): Promise<void>;
}

/**
 * Wires everything: the only place that builds the object graph (main.ts and tests call it).
 * Order: database and migrations, services, HTTP (REST, health, metrics), then listeners.
 */
export async function startFleetService(options: StartOptions): Promise<FleetService> {
  const { config } = options;
  const logger = options.logger ?? createLogger(config.logLevel);
  const clock = options.clock ?? systemClock;
  const metrics = createMetrics();
  // Read first: a wrong certificate path fails the start before anything else is touched.
  const tlsConfig = tlsFiles(config);
  const tlsCredentials = tlsConfig ? TlsCredentials.load(tlsConfig, logger) : null;
  const ownsDatabase = !options.database;
  const database = options.database ?? (await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, logger }));
  const applied = await database.migrate();
  if (applied.length) logger.info({ migrations: applied }, 'database migrated');

  // Cluster mode (REDIS_URL): events, rate limits and broker state are shared through Redis.
  const cluster = config.redisUrl ? createClusterConnections(config.redisUrl, logger) : null;
  const bus: EventBus = cluster ? new RedisEventBus(cluster.publisher, cluster.subscriber, logger, `${config.redisKeyPrefix}:events`) : new InProcessEventBus(logger);
  /** Named readiness checks reported by /readyz; areas (broker, redis) add theirs. */
  const readinessChecks = new Map<string, () => Promise<{ ok: boolean; detail?: string }>>();
  if (cluster) readinessChecks.set('redis', async () => ((await redisHealthy(cluster.commands)) ? { ok: true } : { ok: false, detail: 'no PONG within 1 s' }));
  let outbox: OutboxDispatcher | undefined;
  const transaction = createTransactionRunner(database.knex, () => outbox?.kick());
  const serverSecret = loadServerSecret({ dataDir: config.dataDir });
  const services = createServices(
    { knex: database.knex, transaction, clock, logger },
    {
      serverSecret,
      webhookAllowPrivate: config.webhookAllowPrivate,
      ...(options.resolveHost ? { webhookResolveHost: options.resolveHost } : {}),
      retention: { historyDays: config.historyRetentionDays, eventDays: config.eventRetentionDays },
      deviceCertificates: {
        caFiles: config.deviceCaCertFile && config.deviceCaKeyFile ? { certFile: config.deviceCaCertFile, keyFile: config.deviceCaKeyFile } : undefined,
        days: config.deviceCertDays,
      },
      // Rotation, unclaim and revocation close the device's session on whichever process holds it.
      ...(cluster ? { disconnectRequests: new RedisDisconnectRequests(cluster.publisher, cluster.subscriber, logger, `${config.redisKeyPrefix}:disconnects`) } : {}),
      firmware: {
        dataDir: config.dataDir,
        maxFirmwareBytes: config.maxFirmwareBytes,
        engine: {
          stepTimeoutMs: config.otaStepTimeoutS * 1000,
          bootTimeoutMs: config.otaBootTimeoutS * 1000,
          resendAfterMs: config.otaResendAfterS * 1000,
          linkTtlMs: config.otaLinkTtlS * 1000,
          sweepIntervalMs: config.otaSweepIntervalMs,
          dispatchFirstPage: config.otaDispatchFirstPage,
          dispatchMaxPage: config.otaDispatchMaxPage,
        },
        metrics: {
          published: (n) => metrics.otaCommandsPublished.inc(n),
          ignored: (reason) => metrics.otaReportsIgnored.inc({ reason }),
          finished: (state, n) => n > 0 && metrics.otaUpdatesFinished.inc({ state }, n),
        },
      },
    },
  );
  // The device CA now: a bad DEVICE_CA_* file stops the start, and a CA created on first start
  // exists before any request (nothing creates it inside a request's transaction).
  await services.deviceCa.load();
  // Webhook deliveries are rows created in the dispatcher's transaction: never lost, never doubled.
  outbox = new OutboxDispatcher({ knex: database.knex, bus, logger, clock, onBatch: async (trx, events) => void (await fanOutWebhookDeliveries(trx, clock, events)) });
  const webhookWorker = new WebhookDeliveryWorker({
    knex: database.knex,
    clock,
    logger,
    serverSecret,
    allowPrivate: config.webhookAllowPrivate,
    onAttempt: (outcome) => metrics.webhookAttempts.inc({ outcome }),
  });
  bus.subscribe(() => webhookWorker.kick());
  bus.subscribe(() => metrics.eventsDispatched.inc());
  const retentionWorker = new RetentionWorker({
    retention: services.retention,
    logger,
    exclusive: (pass) => withAdvisoryLock(database.knex, database.kind, ADVISORY_LOCKS.retention, pass),
    onPruned: (result) => {
      for (const [table, rows] of Object.entries(result)) if (rows > 0) metrics.retentionDeleted.inc({ table }, rows);
    },
  });


  const rateLimiter: RateLimiter = cluster ? createRedisRateLimiter(cluster.commands, config.redisKeyPrefix) : new FlexibleRateLimiter();
  const rateLimit = new CallerRateLimit(rateLimiter, () => metrics.rateLimited.inc());
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
        database.knex.raw('select 1'),
        new Promise((_, reject) => setTimeout(() => reject(new Error('timed out after 1 s')), 1000).unref()),
      ]);
      checks.database = { ok: true };
    } catch (error) {
      checks.database = { ok: false, detail: (error as Error).message };
    }
    for (const [name, check] of readinessChecks) checks[name] = await check().catch((error: Error) => ({ ok: false, detail: error.message }));
    const ok = Object.values(checks).every((c) => c.ok);
    if (!ok) res.setHeader('Retry-After', '5');
    res.status(ok ? 200 : 503).json({ status: ok ? 'ready' : 'unavailable', checks });
  });
  app.get('/metrics', metricsAuth(config.metricsToken), async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });

  const routes = allRoutes(services);
  routes.push(openApiRoute(routes));
  // While the database is down, API requests get 503 + Retry-After at once instead of hanging.
  const databaseHealth = new DatabaseHealth(database.knex, logger);
  app.use(['/api/v1', '/graphql'], (_req, res, next) => {
    if (databaseHealth.isUp()) return next();
    sendProblem(res, problem('service_unavailable', 'The database is unavailable; try again shortly.'), 5);
  });
  app.use(
    '/api/v1',
    createRestRouter(routes, {
      apiKeys: services.apiKeys,
      users: services.users,
      idempotency: services.idempotency,
      rateLimit,
      metrics,
      logger,
      maxJsonBodyBytes: config.maxJsonBodyBytes,
    }),
  );
  // Created before listening so the WebSocket upgrade dispatcher can attach.
  // With TLS this is HTTPS: REST, GraphQL (https and wss), the portal, downloads and MQTT over wss.
  const server = tlsCredentials ? https.createServer(tlsCredentials.serverOptions(), app) : http.createServer(app);
  if (server instanceof https.Server) {
    tlsCredentials!.attach(server);
    server.on('tlsClientError', (err) => logger.debug({ err: err.message }, 'HTTPS handshake failed'));
  }
  /** The HTTP server's one `upgrade` handler, by path: /graphql (graphql-ws); the broker adds /mqtt. */
  const upgradeHandlers = new Map<string, (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void>();
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', (error) => logger.debug({ err: error }, 'upgrade socket error'));
    const handler = upgradeHandlers.get(new URL(req.url ?? '/', 'http://localhost').pathname);
    if (!handler) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    handler(req, socket, head);
  });
  const graphql = await createGraphQL({
    services,
    bus,
    rateLimit,
    metrics,
    logger,
    maxJsonBodyBytes: config.maxJsonBodyBytes,
    ...(config.publicUrl ? { allowedOrigins: [config.publicUrl] } : {}),
  });
  app.use('/graphql', graphql.router);
  upgradeHandlers.set('/graphql', graphql.handleUpgrade);
  // The device broker (broker/): MQTT over WebSocket on /mqtt here, TCP on MQTT_PORT below.
  const broker = await DeviceBroker.create({
    auth: services.deviceAuth,
    presence: services.presence,
    otaListener: () => services.otaListener.get(),
    metrics,
    logger,
    clock,
    ...(config.redisUrl ? { backends: createClusterBrokerBackends({
          redisUrl: config.redisUrl,
          prefix: config.redisKeyPrefix,
          onError: throttledRedisErrorLog(logger),
        }) } : {}),
    // With several processes, devices online on another one are not ours to reset.
    reconcileAllOnStart: !cluster,
  });
  upgradeHandlers.set('/mqtt', broker.handleUpgrade);
  // Devices left "online" by a previous run are reconciled before anything can connect.
  await broker.start();
  // Firmware downloads for devices: signed links, no API key (api/src/http/firmware-download.ts).
  app.use(
    firmwareDownloadRouter({
      downloads: services.firmwareDownloads,
      storage: services.firmwareStorage,
      logger,
      onBytes: (n) => metrics.firmwareDownloadBytes.inc(n),
    }),
  );
  // Plug-in point: firmware downloads and the portal mount here.
  // The portal (after /api/v1 and /graphql): static build with SPA fallback for deep links.
  app.use(portalStatic());

  app.use((req, res) => sendProblem(res, problem('not_found', `No route ${req.method} ${req.path}.`)));
  // Whatever escapes a router (a path segment Express cannot decode, ...) is problem+json too.
  app.use(problemErrorHandler(logger));

  await listen(server, config.port, config.host, 'HTTP', 'PORT');
  const httpPort = (server.address() as AddressInfo).port;
  const publicHost = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  const httpUrl = `${tlsCredentials ? 'https' : 'http'}://${publicHost}:${httpPort}`;
  let mqttPort: number | null = null;
  let mqttsPort: number | null = null;
  try {
    if (config.mqttPort !== 'off') mqttPort = await broker.listenTcp(config.mqttPort, config.host);
    if (tlsCredentials) mqttsPort = await broker.listenTls(config.mqttsPort, config.host, tlsCredentials);
  } catch (error) {
    tlsCredentials?.close();
    // Leave nothing running behind the error (the HTTP port is already bound).
    await broker.close().catch(() => undefined);
    await graphql.stop().catch(() => undefined);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await webhookWorker.stop().catch(() => undefined);
    await bus.close().catch(() => undefined);
    if (cluster) await cluster.close();
    if (ownsDatabase) await database.close();
    throw error;
  }
  // Only once both ports are bound: a start that fails on a taken port leaves no demo account
  // behind whose one-time API key nobody saw.
  const demo = database.kind === 'embedded' && config.demoAccount ? await seedDemoAccount(services) : null;
  services.gateway.set(broker);
  // The OTA engine delivers through the broker; links point at PUBLIC_URL (or the bound address).
  services.ota.setBaseUrl(config.publicUrl ?? httpUrl);
  services.ota.start();
  readinessChecks.set('broker', async () => broker.health());

  outbox.start();
  webhookWorker.start();
  retentionWorker.start();
  databaseHealth.start();
  if (config.mqttPort === 'off' && !tlsCredentials) logger.warn('MQTT_PORT=off without TLS: devices can only connect over WebSocket on /mqtt');
  logger.info({ httpPort, mqttPort, mqttsPort, tls: Boolean(tlsCredentials), database: database.kind }, 'fleet service started');

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      logger.info('stopping');
      // No new HTTP connections from here; requests under way (a firmware download to a slow
      // device, say) get HTTP_DRAIN_MS to finish before their connections are closed.
      const httpClosed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await graphql.stop().catch((error: unknown) => logger.error({ err: error }, 'graphql stop failed'));
      // Devices next: they are disconnected (and go offline) and pending heartbeats are flushed
      // while the database and the outbox are still up.
      await services.ota.stop().catch((error: unknown) => logger.error({ err: error }, 'OTA engine stop failed'));
      services.gateway.set(undefined);
      await broker.close().catch((error: unknown) => logger.error({ err: error }, 'broker stop failed'));
      const drained = await Promise.race([httpClosed.then(() => true), sleep(HTTP_DRAIN_MS).then(() => false)]);
      if (!drained) logger.warn({ afterMs: HTTP_DRAIN_MS }, 'HTTP requests still running at shutdown; closing their connections');
      server.closeAllConnections();
      await httpClosed;
      await outbox!.flush().catch(() => undefined);
      databaseHealth.stop();
      await outbox!.stop();
      await webhookWorker.stop();
      await retentionWorker.stop();
      await bus.close();
      if (cluster) await cluster.close();
      if (ownsDatabase) await database.close();
      tlsCredentials?.close();
      logger.info('stopped');
    })());

  return {
    httpUrl,
    httpPort,
    mqttUrl: mqttPort === null ? null : `mqtt://${publicHost}:${mqttPort}`,
    mqttPort,
    mqttsUrl: mqttsPort === null ? null : `mqtts://${publicHost}:${mqttsPort}`,
    mqttsPort,
    tlsCertificate: tlsCredentials?.certificatePem ?? null,
    broker,
    services,
    database,
    metrics,
    bus,
    outbox,
    webhookWorker,
    retentionWorker,
    logger,
    clock,
    demo,
    stop,
  };
}

/**
 * TRUST_PROXY as Express reads it: `true`/`false`, a hop count, or a list of addresses, CIDR
 * ranges and the names `loopback`, `linklocal`, `uniquelocal`.
 */
function trustProxySetting(value: string): boolean | number | string[] {
  if (value === 'true' || value === 'false') return value === 'true';
  if (/^\d+$/.test(value)) return Number(value);
  return value.split(',').map((part) => part.trim()).filter(Boolean);
}

/** Redis errors of the broker's cluster backends: logged at most once a minute per source (ioredis reconnects). */
function throttledRedisErrorLog(logger: Logger): (error: Error, what: string) => void {
  const last = new Map<string, number>();
  return (error, what) => {
    const now = Date.now();
    if (now - (last.get(what) ?? 0) < 60_000) return;
    last.set(what, now);
    logger.warn({ err: error, connection: what }, 'redis connection error (broker cluster backend)');
  };
}

/** Listen, turning "port taken" into a message that names the setting to change. */
export function listen(server: { listen: http.Server['listen']; once: http.Server['once']; off: http.Server['off'] }, port: number, host: string, what: string, setting: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE') {
        reject(new Error(`${what} port ${port} on ${host} is already in use. Set ${setting} to a free port (0 picks any).`));
      } else reject(error);
    };
    server.once('error', onError);
    server.listen(port, host, LISTEN_BACKLOG, () => {
      server.off('error', onError);
      resolve();
    });
  });
}
