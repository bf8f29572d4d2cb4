import { createGraphQL } from './graphql/server';
import { loadServerSecret } from '#core/shared/server-secret';
import { createBackgroundWorkers } from './background-workers';
import { throttledRedisErrorLog } from './redis-error-log';
import { fanOutWebhookDeliveries } from '#core/webhooks/webhook-fanout';
import { HeartbeatIngest } from '#core/devices/heartbeat-ingest';
import { LuminaireIngest } from '#core/luminaire/luminaire-ingest';
import { InProcessDisconnectRequests } from '#core/devices/disconnect-requests';
import { tlsFiles } from '#core/config';
import { TlsCredentials } from './http/tls-credentials';
import { createLogger } from '#core/logger';
import { openDatabase } from '#core/db/database';
import { createTransactionRunner } from '#core/db/transaction';
import { systemClock } from '#core/shared/clock';
import { createServices } from '#core/services';
import { createMetrics } from '#core/metrics';
import { InProcessEventBus, type EventBus } from '#core/events/event-bus';
import { OutboxDispatcher, appendedEvents } from '#core/events/outbox';
import { FlexibleRateLimiter, type RateLimiter } from '#core/rate-limit/rate-limiter';
import { createRedisRateLimiter } from '#core/rate-limit/redis-rate-limiter';
import { RedisEventBus } from '#core/events/redis-event-bus';
import { createClusterConnections } from '#core/cluster/cluster-connections';
import { RedisDisconnectRequests } from '#core/cluster/redis-disconnect-requests';
import { RedisLuminaireLive } from '#core/cluster/redis-luminaire-live';
import { redisHealthy } from '#core/cluster/redis-connection';
import { CallerRateLimit } from './edge/rate-limit';
import { seedDemoAccount, type DemoAccount } from './demo-seed';
import { DatabaseHealth } from '#core/db/database-health';
import { DeviceBroker } from '#broker/create-broker';
import { createClusterBrokerBackends } from '#broker/cluster/aedes-cluster';
import type { DeviceEndpoints } from '#rest/schemas/device-endpoints.schemas';
import { HttpServer, HTTP_DRAIN_MS } from './http-server';
import { Lifecycle } from './lifecycle';
import { listenWithFallback, type MqttPortFallback } from './port-fallback';

export { HTTP_DRAIN_MS } from './http-server';

import type { FleetService, StartOptions } from './fleet-service';
export type { FleetService, StartOptions } from './fleet-service';

/**
 * The composition root: the only place that builds the object graph (main.ts and tests call it).
 * Every part gets what it uses through its constructor, in dependency order: the database, Redis,
 * the bus, the device broker (the domain reaches devices through it), the domain services over
 * it, the workers, GraphQL, the HTTP server. One lifecycle list then starts the running parts in
 * order; a stop, or a start that fails half-way, stops them in reverse.
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
  const database =
    options.database ??
    (await openDatabase({
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      embeddedThread: config.embeddedDatabaseThread,
      logger,
    }));
  const applied = await database.migrate();
  if (applied.length) logger.info({ migrations: applied }, 'database migrated');

  // Cluster mode (REDIS_URL): events, rate limits, disconnect requests and broker state are shared through Redis.
  const cluster = config.redisUrl ? createClusterConnections(config.redisUrl, logger) : null;
  const bus: EventBus = cluster
    ? new RedisEventBus(cluster.publisher, cluster.subscriber, logger, `${config.redisKeyPrefix}:events`)
    : new InProcessEventBus(logger);
  // Rotation, unclaim and revocation close the device's session on whichever process holds it.
  const disconnects = cluster
    ? new RedisDisconnectRequests(cluster.publisher, cluster.subscriber, logger, `${config.redisKeyPrefix}:disconnects`)
    : new InProcessDisconnectRequests(logger);
  // The device broker (broker/): MQTT over WebSocket on /mqtt, TCP on MQTT_PORT, TLS on MQTTS_PORT.
  const broker = await DeviceBroker.create({
    metrics,
    logger,
    disconnects,
    ...(cluster
      ? {
          backends: createClusterBrokerBackends({
            redisUrl: cluster.url,
            prefix: config.redisKeyPrefix,
            onError: throttledRedisErrorLog(logger),
          }),
        }
      : {}),
    // With several processes, devices online on another one are not ours to reset.
    reconcileAllOnStart: !cluster,
  });

  // Set once the webhook worker exists (below): a batch dispatched before then finds it by its poll.
  let wakeWebhookWorker: () => void = () => undefined;
  const outbox = new OutboxDispatcher({
    knex: database.knex,
    bus,
    logger,
    // Only a batch that created deliveries wakes the webhook worker: waking it for every event
    // cost a round (BEGIN, SELECT ... FOR UPDATE, COMMIT) per presence flush that found nothing,
    // a third of the statements of a connection ramp (bench/connection-capacity.bench.ts). Its
    // poll still finds redeliveries and retries.
    onBatch: async (trx, events) =>
      (await fanOutWebhookDeliveries(trx, clock, events)) > 0 ? () => wakeWebhookWorker() : undefined,
  });
  // A committed transaction that appended events wakes the dispatcher (it also polls).
  const transaction = createTransactionRunner(database.knex, (trx) => {
    if (appendedEvents(trx)) outbox.kick();
  });
  const serverSecret = loadServerSecret({ dataDir: config.dataDir });
  const services = createServices(
    { knex: database.knex, plannedOnce: database.plannedOnce, transaction, clock, logger },
    {
      gateway: broker,
      serverSecret,
      webhookAllowPrivate: config.webhookAllowPrivate,
      ...(options.resolveHost ? { webhookResolveHost: options.resolveHost } : {}),
      retention: { historyDays: config.historyRetentionDays, eventDays: config.eventRetentionDays },
      ...(cluster
        ? {
            luminaireLive: new RedisLuminaireLive(cluster.publisher, cluster.subscriber, logger, config.redisKeyPrefix),
          }
        : {}),
      luminaireRetention: {
        rawDays: config.luminaireRawRetentionDays,
        hourlyDays: config.luminaireHourlyRetentionDays,
      },
      deviceCertificates: {
        caFiles:
          config.deviceCaCertFile && config.deviceCaKeyFile
            ? { certFile: config.deviceCaCertFile, keyFile: config.deviceCaKeyFile }
            : undefined,
        days: config.deviceCertDays,
      },
      firmware: {
        dataDir: config.dataDir,
        maxFirmwareBytes: config.maxFirmwareBytes,
        deltas: { maxImageBytes: config.deltaMaxImageBytes },
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
          unknownErrorCode: () => metrics.otaUnknownErrorCodes.inc(),
          lock: ({ reason, capped }) => metrics.otaLockMessages.inc({ reason, capped: String(capped) }),
          finished: (state, n) => n > 0 && metrics.otaUpdatesFinished.inc({ state }, n),
        },
      },
    },
  );
  // Heartbeats, connectivity and applied configuration, written in batches; after each flush the
  // OTA engine hears whose firmware changed.
  const ingest = new HeartbeatIngest({
    presence: services.presence,
    clock,
    logger,
    onFirmwareReported: (reports) => {
      services.ota
        .onFirmwareReported(reports)
        .catch((err: unknown) => logger.error({ err }, 'OTA engine failed on firmware reports'));
    },
    onFlushed: ({ rows, ms }) => {
      metrics.heartbeatFlushRows.inc(rows);
      metrics.heartbeatFlushSeconds.observe(ms / 1000);
    },
  });
  // Luminaire readings: stored in batches, each PUBACK after its batch's commit; partitions made
  // ahead and expired ones dropped hourly (one process of a cluster at a time is not needed: the DDL is idempotent).
  const luminaireIngest = new LuminaireIngest({
    deps: { knex: database.knex, clock, logger },
    partitions: services.luminairePartitions,
    onRecorded: (readings) => services.luminaireLive.publish(readings),
  });
  const { luminairePartitionLoop, webhookWorker, retentionWorker, healthWorker, embeddedVacuumLoop } =
    createBackgroundWorkers({
      database,
      services,
      config,
      clock,
      logger,
      metrics,
      serverSecret,
      bus,
    });
  wakeWebhookWorker = () => webhookWorker.kick();
  const databaseHealth = new DatabaseHealth(() => database.probe(), logger);

  const rateLimiter: RateLimiter = cluster
    ? createRedisRateLimiter(cluster.commands, config.redisKeyPrefix)
    : new FlexibleRateLimiter();
  const rateLimit = new CallerRateLimit(rateLimiter, () => metrics.rateLimited.inc());
  const graphql = await createGraphQL({
    services,
    bus,
    rateLimit,
    metrics,
    logger,
    maxJsonBodyBytes: config.maxJsonBodyBytes,
    ...(config.publicUrl ? { allowedOrigins: [config.publicUrl] } : {}),
  });
  let started = false;
  const http = new HttpServer({
    config,
    logger,
    metrics,
    services,
    knex: database.knex,
    databaseHealth,
    rateLimit,
    graphql: graphql.router,
    upgrades: {
      '/graphql': (req, socket, head) => graphql.handleUpgrade(req, socket, head),
      '/mqtt': broker.handleUpgrade,
    },
    readiness: {
      // Not ready before every component started: a load balancer (or a script waiting for the
      // service) would otherwise reach a process still reconciling devices or seeding its demo.
      startup: () => Promise.resolve(started ? { ok: true } : { ok: false, detail: 'starting' }),
      ...(cluster
        ? {
            redis: async () =>
              (await redisHealthy(cluster.commands)) ? { ok: true } : { ok: false, detail: 'no PONG within 1 s' },
          }
        : {}),
      broker: async () => broker.health(),
    },
    tls: tlsCredentials,
    deviceEndpoints: () => deviceEndpoints(),
  });

  // Set by the broker's start below: an object, since TypeScript does not follow assignments made
  // in callbacks and would take a `let` for still null at the end.
  const ports: { mqtt: number | null; mqtts: number | null } = { mqtt: null, mqtts: null };
  let demo: DemoAccount | null = null;
  // What devices use: PUBLIC_URL's host (else the bound address) with the ports bound now.
  const deviceEndpoints = (): DeviceEndpoints => {
    const { publicHost, url } = http.address;
    const host = config.publicUrl ? new URL(config.publicUrl).hostname : publicHost;
    const web = new URL(config.publicUrl ?? url);
    return {
      mqtt_url: ports.mqtt === null ? null : `mqtt://${host}:${ports.mqtt}`,
      mqtts_url: ports.mqtts === null ? null : `mqtts://${host}:${ports.mqtts}`,
      websocket_url: `${web.protocol === 'https:' ? 'wss' : 'ws'}://${web.host}/mqtt`,
    };
  };
  let mqttPortFallback: MqttPortFallback | null = null;
  // Started top to bottom, stopped bottom to top. A stop first takes no more HTTP connections,
  // closes GraphQL's sockets, stops the OTA engine, disconnects the devices (they go offline
  // while the database and the outbox are still up) and flushes their news, gives HTTP requests
  // under way HTTP_DRAIN_MS, flushes the outbox, stops the workers, then the bus, Redis and the
  // database.
  const lifecycle = new Lifecycle(
    [
      { name: 'TLS credentials', stop: () => tlsCredentials?.close() },
      { name: 'database', stop: () => (ownsDatabase ? database.close() : undefined) },
      { name: 'Redis', stop: () => cluster?.close() },
      { name: 'event bus', stop: () => bus.close() },
      // A bad DEVICE_CA_* file stops the start, and a CA created on first start exists before
      // any request (nothing creates it inside a request's transaction).
      {
        name: 'device CA',
        start: async () => {
          await services.deviceCa.load();
        },
      },
      // Temp files of uploads a process died during (one removes its own as the request ends);
      // only those older than the longest an upload may take, so a process sharing the folder
      // keeps the ones it is writing (FirmwareStorage.removeStaleTemps).
      {
        name: 'firmware temp files',
        start: async () => {
          const removed = await services.firmwareStorage.removeStaleTemps();
          if (removed.length > 0)
            logger.info({ removed: removed.length }, 'removed temp files of interrupted firmware uploads');
        },
      },
      // Before the database closes: a build cut short gives its claim back (DeltaCache.close).
      { name: 'delta builds', stop: () => services.deltas.close() },
      { name: 'retention worker', start: () => retentionWorker.start(), stop: () => retentionWorker.stop() },
      // On PostgreSQL, autovacuum does this (core/housekeeping/embedded-vacuum.ts).
      {
        name: 'embedded database maintenance',
        start: () => embeddedVacuumLoop?.start(),
        stop: async () => embeddedVacuumLoop?.stop(),
      },
      { name: 'fixture health worker', start: () => healthWorker.start(), stop: () => healthWorker.stop() },
      {
        name: 'luminaire ingest',
        start: async () => {
          await services.luminairePartitions.maintain();
          luminairePartitionLoop.start();
          luminaireIngest.start();
        },
        // After the broker closed (stopped later in the list, so earlier here): what it acknowledged is written.
        stop: async () => {
          await luminairePartitionLoop.stop();
          await luminaireIngest.stop();
        },
      },
      { name: 'webhook worker', start: () => webhookWorker.start(), stop: () => webhookWorker.stop() },
      {
        name: 'outbox',
        start: () => {
          outbox.start();
          databaseHealth.start();
        },
        stop: async () => {
          await outbox.settle().catch(() => undefined);
          databaseHealth.stop();
          await outbox.stop();
        },
      },
      // Stopped once HTTP has drained: a GraphQL request under way at the stop still executes.
      { name: 'GraphQL', stop: () => graphql.stop() },
      // Bound before the broker starts (which refuses /mqtt until then), drained after it closed.
      {
        name: 'HTTP server',
        start: async () => {
          await http.listen();
        },
        stop: () => http.drain(HTTP_DRAIN_MS),
      },
      {
        name: 'device broker',
        // Devices left "online" by a previous run are reconciled before any can connect.
        start: async () => {
          await broker.start({
            auth: services.deviceAuth,
            presence: services.presence,
            ingest,
            otaListener: services.ota,
            configs: services.desiredConfigs,
            rotations: services.rotations,
            luminaire: { now: () => clock.now(), record: (report) => luminaireIngest.record(report) },
          });
          const listenMqtt = (port: number) => broker.listenTcp(port, config.host);
          if (config.mqttPort !== 'off' && options.portFallback) {
            const bound = await listenWithFallback({
              listen: listenMqtt,
              dataDir: config.dataDir,
              defaultPort: options.portFallback.defaultMqttPort,
            });
            ports.mqtt = bound.port;
            mqttPortFallback = bound.fallback;
            if (bound.fallback)
              logger.warn({ ...bound.fallback }, 'MQTT is not on its default port (zero-configuration start)');
          } else if (config.mqttPort !== 'off') ports.mqtt = await listenMqtt(config.mqttPort);
          if (tlsCredentials) ports.mqtts = await broker.listenTls(config.mqttsPort, config.host, tlsCredentials);
        },
        stop: () => broker.close(),
      },
      // Only once every port is bound: a start that fails on a taken port leaves no demo account
      // behind whose one-time API key nobody saw.
      {
        name: 'demo account',
        start: async () =>
          void (demo = database.kind === 'embedded' && config.demoAccount ? await seedDemoAccount(services) : null),
      },
      // Download links point at PUBLIC_URL, or at the address HTTP is bound to.
      {
        name: 'OTA engine',
        start: () => {
          services.ota.setBaseUrl(config.publicUrl ?? http.address.url);
          services.ota.start();
        },
        stop: () => services.ota.stop(),
      },
      // Before the drain: open subscriptions would hold it for its whole time.
      { name: 'GraphQL subscriptions', stop: () => graphql.closeSubscriptions() },
      { name: 'HTTP intake', stop: () => http.stopAccepting() },
    ],
    logger,
  );
  await lifecycle.start();
  started = true;
  if (config.mqttPort === 'off' && !tlsCredentials)
    logger.warn('MQTT_PORT=off without TLS: devices can only connect over WebSocket on /mqtt');
  const { port: httpPort, url: httpUrl, publicHost } = http.address;
  logger.info(
    { httpPort, mqttPort: ports.mqtt, mqttsPort: ports.mqtts, tls: Boolean(tlsCredentials), database: database.kind },
    'fleet service started',
  );

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      logger.info('stopping');
      await lifecycle.stop();
      logger.info('stopped');
    })());

  return {
    httpUrl,
    httpPort,
    mqttUrl: ports.mqtt === null ? null : `mqtt://${publicHost}:${ports.mqtt}`,
    mqttPort: ports.mqtt,
    mqttsUrl: ports.mqtts === null ? null : `mqtts://${publicHost}:${ports.mqtts}`,
    mqttsPort: ports.mqtts,
    tlsCertificate: tlsCredentials?.certificatePem ?? null,
    broker,
    ingest,
    services,
    database,
    metrics,
    bus,
    outbox,
    webhookWorker,
    retentionWorker,
    healthWorker,
    embeddedVacuumLoop,
    logger,
    clock,
    demo,
    mqttPortFallback,
    stop,
  };
}
