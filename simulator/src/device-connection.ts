import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { topics } from '#protocol/topics';

/** How long a closing connection waits for the PUBACKs of its last publishes (ms). */
const END_GRACE_MS = 2000;

/** mqtt.js's `log` option: nothing (see openDeviceConnection). */
const noLog = (): void => undefined;

/**
 * Opens one MQTT connection with the settings docs/device-protocol.md "Connecting" asks of a
 * module: client id = serial, clean session false, keepalive 30 s, the offline Last Will, and
 * no automatic reconnect (the device waits as "Reconnecting" says, reconnect-backoff.ts).
 */
export function openDeviceConnection(input: {
  brokerUrl: string;
  serial: string;
  /** Username and password, or the client certificate and key (device-secrets.ts). */
  secret: Pick<IClientOptions, 'username' | 'password' | 'cert' | 'key'>;
  ca?: string | undefined;
  clean?: boolean | undefined;
}): MqttClient {
  return mqtt.connect(input.brokerUrl, {
    clientId: input.serial,
    ...input.secret,
    ...(input.ca !== undefined ? { ca: input.ca } : {}),
    clean: input.clean ?? false,
    keepalive: 30,
    reconnectPeriod: 0,
    connectTimeout: 15_000,
    will: { topic: topics.status(input.serial), payload: Buffer.from('{"state":"offline"}'), qos: 1, retain: false },
    // mqtt.js logs every packet through `debug`; even switched off, those calls took 5% of a
    // 10,000-device fleet's CPU (bench/devices-gateway.bench.ts, profiled). --verbose prints
    // the protocol itself (trace).
    log: noLog,
  });
}

/**
 * Ends a connection the way a module powering down would: a live one gets a moment for its
 * last publishes' PUBACKs (a report is acknowledged once the service stored it), then closes
 * with DISCONNECT; one already gone is dropped at once. mqtt.js's graceful end waits for those
 * PUBACKs without limit, and on a closed connection they never come: a stop after a service
 * restart then hung for ever, and so did a reboot once broken downloads were resumed.
 */
export async function closeDeviceConnection(client: MqttClient): Promise<void> {
  if (!client.connected) {
    client.end(true);
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const graceful = client.endAsync().catch(() => undefined);
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), END_GRACE_MS)));
  if ((await Promise.race([graceful, late])) === 'late') client.end(true);
  clearTimeout(timer);
}
