import type { PublishPacket } from 'aedes';
import type { Logger } from '#core/logger';
import type { DeviceSession } from '#core/devices/device-auth.service';
import type { Connection, Connections } from './connections';

/** A configuration as the service sends it. */
export interface DesiredConfig {
  version: number;
  config: Record<string, unknown>;
}

/**
 * The configuration on `devices/{serial}/config`: exactly one copy on each connection, then one
 * on every change (docs/device-protocol.md "Configuration").
 *
 * A device used to get 1 to 3 copies on connect, depending on a race: the copy its persistent
 * session had queued while it was away, the publish the broker made on every connect (the
 * retained store is lost on a restart with in-memory persistence), and the retained copy its
 * SUBSCRIBE brought. Now nothing is retained, and one rule at the delivery point decides: on a
 * connection a configuration is delivered only once the connection is set up (a copy replayed
 * from the session is dropped) and only when its version is above the last one delivered on that
 * connection (a copy of the same version, or an older one overtaken by a change, is dropped).
 * The desired one is read from the database and sent once the connection's `config`
 * subscription is in place; a change made meanwhile is delivered live and the older read drops.
 */
export class ConfigDelivery {
  constructor(
    private readonly input: {
      connections: Connections;
      /** The desired configuration now (a database read); absent: what the session read at authentication. */
      read: (() => ((session: DeviceSession) => Promise<DesiredConfig | null>) | undefined) | undefined;
      publish: (serial: string, message: DesiredConfig) => Promise<void>;
      logger: Logger;
    },
  ) {}

  /**
   * The connection's `config` subscription is in place and the connection is set up: send it the
   * desired configuration, once per connection (a second SUBSCRIBE gets nothing more).
   */
  subscribed(conn: Connection): void {
    if (conn.configRequested || !conn.ready || !conn.configSubscribed) return;
    conn.configRequested = true;
    void this.send(conn);
  }

  /**
   * The delivery guard for `config` on one connection: true to deliver `packet`, which it then
   * records as the connection's version. Called by authorizeForward for every copy (live,
   * replayed from the persistent session, retained on SUBSCRIBE).
   */
  mayDeliver(conn: Connection, packet: PublishPacket): boolean {
    // Replayed from the persistent session while the connection is set up, or left in a retained
    // store by an earlier version of the service: the desired configuration follows anyway.
    if (!conn.ready || packet.retain) return false;
    const version = versionOf(packet.payload);
    if (version === null || version <= conn.configVersion) return false;
    conn.configVersion = version;
    return true;
  }

  private async send(conn: Connection): Promise<void> {
    const { session } = conn;
    const snapshot: DesiredConfig | null =
      session.desiredConfigVersion > 0
        ? { version: session.desiredConfigVersion, config: session.desiredConfig }
        : null;
    // Read at authentication, kept only until now (memory per device matters at 10,000).
    session.desiredConfig = {};
    let desired = snapshot;
    const read = this.input.read?.();
    if (read) {
      try {
        desired = await read(session);
      } catch (err) {
        this.input.logger.warn(
          { err, serial: session.serial },
          'reading the desired configuration failed; sending the one read at connect',
        );
      }
    }
    if (!desired || desired.version <= conn.configVersion) return;
    if (this.input.connections.currentOf(session.serial) === undefined) return;
    try {
      await this.input.publish(session.serial, desired);
    } catch (err) {
      this.input.logger.error({ err, serial: session.serial }, 'publishing the desired configuration failed');
    }
  }
}

function versionOf(payload: PublishPacket['payload']): number | null {
  try {
    const parsed: unknown = JSON.parse(typeof payload === 'string' ? payload : Buffer.from(payload).toString('utf8'));
    const version = (parsed as { version?: unknown } | null)?.version;
    return typeof version === 'number' && Number.isInteger(version) ? version : null;
  } catch {
    return null;
  }
}
