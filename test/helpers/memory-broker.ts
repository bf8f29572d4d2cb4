import { Duplex } from 'node:stream';
import { MqttClient, type IClientOptions } from 'mqtt';
import { DeviceBroker, type DeviceBrokerOptions, type DeviceDomain } from '#broker/create-broker';
import { createMetrics } from '#core/metrics';
import { createLogger } from '#core/logger';
import type { DeviceSession } from '#core/devices/device-auth.service';
import type { HeartbeatIngest, HeartbeatValues } from '#core/devices/heartbeat-ingest';
import type { RefusedField } from '#protocol/heartbeat-fields';
import type { OtaDeviceListener } from '#core/devices/device-gateway';

/**
 * The device broker over a stub domain, driven through in-memory duplex streams as aedes' own
 * tests drive Aedes: no database, no port, no service. The floor for the broker's rules (topic
 * ACL, subscription and delivery guards, message handling and its counters); what needs the
 * real service behind it stays on test-server.ts.
 */
export interface MemoryBroker {
  broker: DeviceBroker;
  metrics: ReturnType<typeof createMetrics>;
  /**
   * What the handlers handed the domain, in order: `heartbeat SERIAL`, `offline SERIAL last_will`,
   * `refused SERIAL topic_not_allowed TOPIC`, `field SERIAL ip invalid_format`, ...
   */
  heard: string[];
  /** A device (serial = client id = username) connected over an in-memory stream. */
  connect(serial: string, options?: IClientOptions & { password?: string }): Promise<MqttClient>;
  close(): Promise<void>;
}

/** A pair of connected duplex streams: what one writes, the other reads. */
export function duplexPair(): [Duplex, Duplex] {
  const sides: Duplex[] = [];
  const make = (other: () => Duplex) =>
    new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, done) {
        other().push(chunk);
        done();
      },
      final(done) {
        other().push(null);
        done();
      },
      destroy(error, done) {
        if (!other().destroyed) other().destroy();
        done(error);
      },
    });
  sides.push(
    make(() => sides[1]!),
    make(() => sides[0]!),
  );
  return [sides[0]!, sides[1]!];
}

export async function startMemoryBroker(
  devices: Record<string, string>,
  options: Pick<DeviceBrokerOptions, 'keepaliveMaxS'> = {},
): Promise<MemoryBroker> {
  const metrics = createMetrics();
  const logger = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
  const heard: string[] = [];
  const sessions = new Map<string, DeviceSession>(
    Object.keys(devices).map((serial, i) => [
      serial,
      { deviceId: `device-${i}`, accountId: 'account-1', serial, desiredConfigVersion: 0, desiredConfig: {} },
    ]),
  );
  const serialOf = (deviceId: string) => [...sessions.values()].find((s) => s.deviceId === deviceId)?.serial;
  const ingest = {
    backlog: 0,
    start: () => undefined,
    stop: () => Promise.resolve(),
    flush: () => Promise.resolve(),
    heartbeat: (deviceId: string, values: HeartbeatValues, refused: RefusedField[] = []) => {
      heard.push(`heartbeat ${serialOf(deviceId)}${Object.keys(values).length ? ` ${JSON.stringify(values)}` : ''}`);
      for (const r of refused) heard.push(`field ${serialOf(deviceId)} ${r.field} ${r.reason}`);
    },
    messageRefused: (deviceId: string, input: { reason: string; topic: string }) =>
      heard.push(`refused ${serialOf(deviceId)} ${input.reason} ${input.topic}`),
    connected: (deviceId: string) => heard.push(`online ${serialOf(deviceId)}`),
    // Counted for the firmware's reconnect rates (docs/fixture-health.md); nothing to show here.
    sessionStarted: () => undefined,
    configReported: (deviceId: string, version: number) => heard.push(`config ${serialOf(deviceId)} ${version}`),
    offline: (deviceId: string, reason: string) => heard.push(`offline ${serialOf(deviceId)} ${reason}`),
    // Every public member of the real ingest (a method added there and missing here fails to
    // compile, instead of throwing inside the broker at run time).
  } satisfies { [K in keyof HeartbeatIngest]: unknown } as unknown as HeartbeatIngest;
  const otaListener: OtaDeviceListener = {
    onDeviceReady: ({ serial }) => (heard.push(`ready ${serial}`), Promise.resolve()),
    onDeviceHeard: ({ serial }) => (heard.push(`heard ${serial}`), Promise.resolve()),
    onProgress: ({ serial }) => (heard.push(`progress ${serial}`), Promise.resolve()),
    onFirmwareReported: () => Promise.resolve(),
  };
  const domain: DeviceDomain = {
    auth: {
      authenticate: ({ clientId, username, password }) => {
        const session = sessions.get(clientId);
        if (!session || username !== clientId) return Promise.resolve({ ok: false, reason: 'unknown_serial' });
        if (password?.toString() !== devices[clientId]) return Promise.resolve({ ok: false, reason: 'bad_password' });
        return Promise.resolve({ ok: true, session });
      },
      authenticateCertificate: () => Promise.resolve({ ok: false, reason: 'unknown_serial' }),
    },
    presence: {
      reconcileAfterRestart: () => Promise.resolve(0),
      sweepTimedOut: () => Promise.resolve({ offline: 0, examined: 0 }),
    },
    ingest,
    otaListener,
  };
  const broker = await DeviceBroker.create({ metrics, logger, sweepIntervalMs: 60_000, ...options });
  await broker.start(domain);
  const clients: MqttClient[] = [];
  return {
    broker,
    metrics,
    heard,
    connect(serial, options = {}) {
      // One in-memory stream per connection: the broker gets the other end.
      const client = new MqttClient(
        () => {
          const [device, service] = duplexPair();
          broker.acceptStream(service);
          return device;
        },
        {
          clientId: serial,
          username: serial,
          password: options.password ?? devices[serial] ?? '',
          clean: false,
          reconnectPeriod: 0,
          protocolVersion: 4,
          ...options,
        },
      );
      clients.push(client);
      return new Promise((resolve, reject) => {
        client.once('connect', () => resolve(client));
        client.once('error', reject);
      });
    },
    async close() {
      await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
      await broker.close();
    },
  };
}
