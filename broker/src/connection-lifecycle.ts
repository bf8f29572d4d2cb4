import type { Aedes, Client } from 'aedes';
import type { Logger } from '#core/logger';
import type { Metrics } from '#core/metrics';
import type { DeviceSession } from '#core/devices/device-auth.service';
import type { HeartbeatIngest } from '#core/devices/heartbeat-ingest';
import { topics } from '#protocol/topics';
import { clientOf } from './aedes-internals';
import { LogThrottle } from './log-throttle';
import type { Connections } from './connections';
import type { OtaReadiness } from './ota-readiness';
import type { ConfigDelivery } from './config-delivery';
import type { CredentialDelivery } from './credential-delivery';

export interface ConnectionLifecycleInput {
  aedes: Aedes;
  connections: Connections;
  readiness: OtaReadiness;
  config: ConfigDelivery;
  credentials: CredentialDelivery;
  /** The started broker's ingest (connections exist only once it is started). */
  ingest: () => HeartbeatIngest;
  /** True once the broker is closing: a connection that ends then ends by `shutdown`. */
  closing: () => boolean;
  metrics: Metrics;
  logger: Logger;
}

/**
 * A device connection's life as Aedes reports it: authenticated or refused, ready (presence,
 * then what is due on it: configuration, a queued command, pending credentials), subscribed,
 * timed out, closed. The deliveries themselves are in their own modules.
 */
export class ConnectionLifecycle {
  private readonly refuseLog = new LogThrottle();

  constructor(private readonly input: ConnectionLifecycleInput) {}

  /** Listens to Aedes's connection events; once, right after the broker is made. */
  wire(): void {
    const { aedes, connections, readiness, config, credentials, metrics, logger } = this.input;
    aedes.on('clientReady', (client) => this.ready(client));
    aedes.on('clientDisconnect', (client) => this.disconnected(client));
    aedes.on('keepaliveTimeout', (client) => {
      const conn = connections.of(client);
      if (conn) conn.keepaliveTimedOut = true;
    });
    aedes.on('subscribe', (subs, client) => {
      const conn = connections.of(client);
      if (!conn || !conn.ready) return;
      const granted = (topic: string) => subs.some((s) => (s.qos as number) !== 128 && s.topic === topic);
      if (granted(topics.ota(conn.session.serial))) readiness.subscribed(conn);
      if (granted(topics.config(conn.session.serial))) config.subscribed(conn);
      if (granted(topics.credentials(conn.session.serial))) credentials.subscribed(client);
    });
    aedes.on('clientError', (client, err) =>
      logger.debug({ serial: client.id, err: err.message }, 'MQTT client error'),
    );
    aedes.on('connectionError', (_client, err) => logger.debug({ err: err.message }, 'MQTT connection error'));
    metrics.mqttConnectedDevices.set(0);
  }

  /** The authenticate hook accepted `client` as `session` (a second connection of the serial takes over). */
  authenticated(client: Client, session: DeviceSession): void {
    const { aedes, connections } = this.input;
    connections.authenticated({ client, session, existing: clientOf(aedes, session.serial) });
  }

  /** The authenticate hook refused `client`: counted, and logged once per serial and reason a minute. */
  refused(client: Client, reason: string, serial: string | undefined): void {
    this.input.metrics.mqttConnectionsRefused.inc({ reason });
    if (this.refuseLog.shouldLog(`${serial ?? '?'}:${reason}`)) {
      const address = (client.conn as { remoteAddress?: string } | undefined)?.remoteAddress;
      this.input.logger.warn({ serial, reason, address }, 'MQTT connection refused');
    }
  }

  private ready(client: Client): void {
    const { connections, readiness, config, credentials, metrics } = this.input;
    const conn = connections.ready(client);
    if (!conn) return;
    metrics.mqttConnectedDevices.set(connections.size);
    this.input.ingest().sessionStarted(conn.session.deviceId);
    // A restored persistent session brings its `ota` and `config` subscriptions back without a
    // SUBSCRIBE: the configuration goes out now (once for this connection), queued commands too.
    config.subscribed(conn);
    if (conn.subscribedOta) readiness.subscribed(conn);
    // A connection with a pending password or a renewed certificate confirms that rotation; what
    // is still pending is delivered (restored `credentials` subscription, or on its SUBSCRIBE).
    credentials.connected(client);
  }

  private disconnected(client: Client): void {
    const { connections, metrics } = this.input;
    const closed = connections.closed(client);
    if (!closed) return;
    metrics.mqttConnectedDevices.set(connections.size);
    if (closed.takenOver) return;
    this.input
      .ingest()
      .offline(
        closed.conn.session.deviceId,
        this.input.closing() ? 'shutdown' : closed.conn.keepaliveTimedOut ? 'keepalive_timeout' : 'disconnected',
      );
  }
}
