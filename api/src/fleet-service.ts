import type { DeviceBroker } from '#broker/create-broker';
import type { Config, PortFallback } from '#core/config';
import type { Database } from '#core/db/database';
import type { HeartbeatIngest } from '#core/devices/heartbeat-ingest';
import type { EventBus } from '#core/events/event-bus';
import type { OutboxDispatcher } from '#core/events/outbox';
import type { HealthWorker } from '#core/health/health-worker';
import type { RetentionWorker } from '#core/housekeeping/retention-worker';
import type { SingleFlightLoop } from '#core/shared/single-flight-loop';
import type { Logger } from '#core/logger';
import type { Metrics } from '#core/metrics';
import type { Services } from '#core/services';
import type { Clock } from '#core/shared/clock';
import type { WebhookDeliveryWorker } from '#core/webhooks/delivery-worker';
import type { HostResolver } from '#core/webhooks/url-guard';
import type { DemoAccount } from './demo-seed';
import type { MqttPortFallback } from './port-fallback';

/** What starts a service (app.ts startFleetService). */
export interface StartOptions {
  config: Config;
  clock?: Clock;
  logger?: Logger;
  /** Use this database instead of opening one from the config (tests that restart share it). */
  database?: Database;
  /** DNS for the creation check of webhook receiver names (tests pin answers). Default: the system resolver. */
  resolveHost?: HostResolver;
  /**
   * A zero-configuration start (main.ts, core/config.ts portFallback): a taken MQTT port moves
   * MQTT to a free one, remembered in DATA_DIR. Unset (every configured start, the tests): a
   * taken port fails the start.
   */
  portFallback?: PortFallback;
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
  /** The embedded device broker (the presence sweep is reachable for tests and benchmarks). */
  readonly broker: DeviceBroker;
  /** Device news written in batches (tests and benchmarks flush it). */
  readonly ingest: HeartbeatIngest;
  readonly services: Services;
  readonly database: Database;
  readonly metrics: Metrics;
  readonly bus: EventBus;
  readonly outbox: OutboxDispatcher;
  /** Sends webhook deliveries (tests call `settle()` after moving the clock). */
  readonly webhookWorker: WebhookDeliveryWorker;
  /** Deletes history and events past their retention (tests call `runNow()` for one pass now). */
  readonly retentionWorker: RetentionWorker;
  /** Fixture health states, the rollout gate's fixture signals, warranty expiry (tests call `runNow()`). */
  readonly healthWorker: HealthWorker;
  /** VACUUM and ANALYZE as autovacuum would, on the embedded database only (null on PostgreSQL; tests call `run()`). */
  readonly embeddedVacuumLoop: SingleFlightLoop | null;
  readonly logger: Logger;
  readonly clock: Clock;
  /** The demo account when this start created it, or when an earlier start created it and it was never used. */
  readonly demo: DemoAccount | null;
  /** Set when a zero-configuration start moved MQTT off its default port (or onto a remembered one); the banner says so. */
  readonly mqttPortFallback: MqttPortFallback | null;
  /** Stop accepting, finish in-flight work, flush, close the database (unless it was passed in). */
  stop(): Promise<void>;
}
