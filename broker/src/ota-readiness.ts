import type { Logger } from '#core/logger';
import type { OtaDeviceListener } from '#core/devices/device-gateway';
import type { Connection, Connections } from './connections';
import { ReadyNotifier, type ReadyDevice } from './ready-notifier';

/**
 * Tells the OTA engine when a connected device may get commands: `ready` once its `ota`
 * subscription is in place, `heard` once it also said what it runs. The engine dispatches queued
 * updates on the first and re-sends unanswered commands only on the second.
 */
export class OtaReadiness {
  private readonly ready: ReadyNotifier;
  private readonly heard: ReadyNotifier<ReadyDevice & { firmware: string; connection: string }>;
  private closed = false;

  constructor(
    private readonly connections: Connections,
    listener: () => OtaDeviceListener | undefined,
    logger: Logger,
  ) {
    this.ready = new ReadyNotifier(listener, logger, (l, device) => l.onDeviceReady(device));
    this.heard = new ReadyNotifier(listener, logger, (l, device) => l.onDeviceHeard(device), 'device heard');
  }

  /** The connection's `ota` subscription is in place (a SUBSCRIBE, or a restored session). */
  subscribed(conn: Connection): void {
    const { accountId, deviceId, serial } = conn.session;
    conn.otaReady = true;
    this.ready.notify({ accountId, deviceId, serial });
    this.notifyHeard(conn);
  }

  /** A heartbeat said what the device runs; only the first on a connection counts. */
  firstHeartbeat(conn: Connection, firmware: string): void {
    if (conn.firstFirmware !== null) return;
    conn.firstFirmware = firmware;
    this.notifyHeard(conn);
  }

  /** Nothing more is handed to the OTA engine (the broker is closing). */
  close(): void {
    this.closed = true;
    this.ready.close();
    this.heard.close();
  }

  /**
   * Once per connection, when the device is ready and its first heartbeat arrived (whichever
   * comes last), and the progress reports it sent before that heartbeat are stored: only then
   * may the OTA engine re-send what the device has still not answered. A device back from a
   * killed process or a reboot sends the report it kept right after its CONNACK, before its
   * heartbeat; a re-send decided before that report is stored reaches it after it finished the
   * job (test/ota/ota-finished-not-resent.test.ts).
   */
  private notifyHeard(conn: Connection): void {
    if (conn.heardQueued || !conn.otaReady || conn.firstFirmware === null) return;
    conn.heardQueued = true;
    const { accountId, deviceId, serial } = conn.session;
    const firmware = conn.firstFirmware;
    void Promise.resolve(conn.reportsStored).then(() => {
      const client = this.connections.currentOf(serial);
      if (this.closed || !client || this.connections.of(client) !== conn) return;
      conn.heardSent = true;
      this.heard.notify({ accountId, deviceId, serial, firmware, connection: conn.id });
    });
  }
}
