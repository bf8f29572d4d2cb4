import type { Client } from 'aedes';
import type { Logger } from '#core/logger';
import type { Metrics } from '#core/metrics';
import type { DeviceSession } from '#core/devices/device-auth.service';
import type { DeviceRotations } from '#core/devices/credential-rotation.service';
import { topics } from '#protocol/topics';
import type { Connections } from './connections';
import type { CredentialRequests } from './handlers/context';
import { credentialsPayload } from './device-messages';
import { subscribedTo, writeQos1Direct } from './aedes-internals';
import { LogThrottle } from './log-throttle';

/**
 * Credentials rotation on the broker's side (docs/device-protocol.md "Credentials rotation"):
 * new passwords and renewed certificates reach a device only over a connection that is set up
 * and subscribed to its `credentials` topic, written straight to that connection
 * (`writeQos1Direct`): never routed through Aedes, so never retained, never queued in a
 * clean=false session while the device is away, never copied to Redis. The truth of what is
 * pending is in the database; it is offered again on every connection while it is pending
 * (connected, subscribed) and when a rotation starts (offer). Nothing here logs a payload.
 */
export class CredentialDelivery implements CredentialRequests {
  private readonly refusalLog = new LogThrottle();

  constructor(
    private readonly input: {
      connections: Connections;
      /** The domain's rotations; undefined before the broker started (and in stub domains without them). */
      rotations: () => DeviceRotations | undefined;
      metrics: Metrics;
      logger: Logger;
    },
  ) {}

  /**
   * The connection is set up (CONNACK sent). One that authenticated with a pending password or a
   * renewed certificate confirms that rotation; then whatever is still pending is offered.
   */
  connected(client: Client): void {
    const conn = this.input.connections.of(client);
    const rotations = this.input.rotations();
    if (!conn || !rotations) return;
    const { session } = conn;
    if (!session.rotationOpen && session.confirmsRotation === undefined) return;
    const confirm =
      session.confirmsRotation !== undefined || session.certificateFingerprint !== undefined
        ? rotations.connected({
            ...device(session),
            confirmsRotation: session.confirmsRotation,
            certificateFingerprint: session.certificateFingerprint,
          })
        : Promise.resolve();
    confirm
      .catch((err: unknown) =>
        this.input.logger.error({ err, serial: session.serial }, 'confirming a credential rotation failed'),
      )
      .finally(() => {
        if (session.rotationOpen) this.deliver(client);
      });
  }

  /** The connection's SUBSCRIBE to its `credentials` was granted. */
  subscribed(client: Client): void {
    const conn = this.input.connections.of(client);
    if (conn?.ready && conn.session.rotationOpen) this.deliver(client);
  }

  /** A rotation started for `serial` (on this process or another): deliver it if the device is connected here. */
  offer(serial: string): void {
    const client = this.input.connections.currentOf(serial);
    const conn = client && this.input.connections.of(client);
    if (!client || !conn) return;
    conn.session.rotationOpen = true;
    this.deliver(client);
  }

  async acknowledge(session: DeviceSession, rotationId: string): Promise<void> {
    const rotations = this.input.rotations();
    if (!rotations) return;
    const outcome = await rotations.acknowledge({ ...device(session), rotationId });
    if (outcome === 'unknown')
      this.logRefusal(session.serial, 'ack_unknown', 'credentials ack for no pending rotation ignored');
    else this.input.logger.info({ serial: session.serial, rotationId, outcome }, 'device acknowledged new credentials');
  }

  async requestCertificate(session: DeviceSession, csr: string): Promise<void> {
    const rotations = this.input.rotations();
    if (!rotations) return;
    const outcome = await rotations.requestCertificate({ ...device(session), csr });
    if (outcome.ok) {
      this.input.logger.info(
        { serial: session.serial, rotationId: outcome.rotationId },
        'certificate renewed from a device CSR',
      );
      return;
    }
    this.input.metrics.deviceCsrRefused.inc({ reason: outcome.reason });
    this.logRefusal(session.serial, outcome.reason, 'certificate request from the device refused');
  }

  /** Reads what is pending and writes it to this connection, if it is still the device's and subscribed. */
  private deliver(client: Client): void {
    const conn = this.input.connections.of(client);
    const rotations = this.input.rotations();
    if (!conn || !rotations || !conn.ready) return;
    const { session } = conn;
    const topic = topics.credentials(session.serial);
    if (!subscribedTo(client, topic)) return;
    rotations
      .deliveries(device(session))
      .then((deliveries) => {
        if (deliveries.length === 0) session.rotationOpen = false;
        // The device may have gone, or connected again elsewhere, while the database answered.
        if (!this.input.connections.isCurrent(session.serial, client)) return;
        for (const delivery of deliveries) {
          if (writeQos1Direct(client, { topic, payload: Buffer.from(JSON.stringify(credentialsPayload(delivery))) }))
            this.input.metrics.credentialsDelivered.inc({ kind: delivery.kind });
        }
      })
      .catch((err: unknown) =>
        this.input.logger.error({ err, serial: session.serial }, 'reading the credentials to deliver failed'),
      );
  }

  private logRefusal(serial: string, reason: string, message: string): void {
    if (this.refusalLog.shouldLog(`${serial}:${reason}`)) this.input.logger.warn({ serial, reason }, message);
  }
}

function device(session: DeviceSession): { accountId: string; deviceId: string; serial: string } {
  return { accountId: session.accountId, deviceId: session.deviceId, serial: session.serial };
}
