import type { Config } from '#core/config';
import type { Database } from '#core/db/database';
import { ADVISORY_LOCKS, withAdvisoryLock } from '#core/db/advisory-lock';
import type { EventBus } from '#core/events/event-bus';
import { HealthWorker } from '#core/health/health-worker';
import { RetentionWorker } from '#core/housekeeping/retention-worker';
import { EMBEDDED_VACUUM_INTERVAL_MS, vacuumEmbeddedDatabase } from '#core/housekeeping/embedded-vacuum';
import type { Logger } from '#core/logger';
import type { Metrics } from '#core/metrics';
import type { Services } from '#core/services';
import type { Clock } from '#core/shared/clock';
import { SingleFlightLoop } from '#core/shared/single-flight-loop';
import { WebhookDeliveryWorker } from '#core/webhooks/delivery-worker';

/**
 * The service's background work, outside any request: webhook deliveries, retention, fixture
 * health with its rollout gate, the luminaire partitions, and on the embedded database what
 * PostgreSQL's autovacuum does elsewhere. Created here, started and stopped
 * in their places in the lifecycle of app.ts.
 */
export function createBackgroundWorkers(input: {
  database: Database;
  services: Services;
  config: Config;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  serverSecret: ConstructorParameters<typeof WebhookDeliveryWorker>[0]['serverSecret'];
  bus: EventBus;
}) {
  const { database, services, config, clock, logger, metrics, serverSecret, bus } = input;
  const luminairePartitionLoop = new SingleFlightLoop({
    round: async () => {
      await services.luminairePartitions.maintain();
    },
    onError: (err) => logger.warn({ err }, 'luminaire partition pass failed; will retry'),
    poll: { everyMs: 60 * 60_000 },
  });
  // Webhook deliveries are rows created in the dispatcher's transaction: never lost, never doubled.
  // The dispatcher wakes it once a batch that created some committed (app.ts); it polls besides.
  const webhookWorker = new WebhookDeliveryWorker({
    knex: database.knex,
    clock,
    logger,
    serverSecret,
    allowPrivate: config.webhookAllowPrivate,
    onAttempt: (outcome) => metrics.webhookAttempts.inc({ outcome }),
  });
  bus.subscribe(() => metrics.eventsDispatched.inc());
  const retentionWorker = new RetentionWorker({
    retention: services.retention,
    logger,
    exclusive: (pass) => withAdvisoryLock(database.knex, database.kind, ADVISORY_LOCKS.retention, pass),
    onPruned: (result) => {
      for (const [table, rows] of Object.entries(result)) if (rows > 0) metrics.retentionDeleted.inc({ table }, rows);
    },
  });
  const healthWorker = new HealthWorker({
    health: services.health,
    gate: services.fixtureGate,
    warranty: services.warranty,
    logger,
    exclusive: (pass) => withAdvisoryLock(database.knex, database.kind, ADVISORY_LOCKS.fixtureHealth, pass),
  });
  // On PostgreSQL, autovacuum does this. The first pass comes a minute after the start, not in
  // the way of a reconnect storm.
  const embeddedVacuumLoop: SingleFlightLoop | null =
    database.kind === 'embedded'
      ? new SingleFlightLoop({
          round: async () => {
            await vacuumEmbeddedDatabase({
              knex: database.knex,
              logger,
              stopping: () => embeddedVacuumLoop?.stopping ?? true,
            });
          },
          onError: (err) => logger.warn({ err }, 'embedded database maintenance failed; will retry'),
          poll: { everyMs: EMBEDDED_VACUUM_INTERVAL_MS },
        })
      : null;
  return { luminairePartitionLoop, webhookWorker, retentionWorker, healthWorker, embeddedVacuumLoop };
}
