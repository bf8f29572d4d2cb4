import mqtt, { type MqttClient, type IClientOptions } from 'mqtt';
import { expect } from 'vitest';
import type { TestAccount, TestServer } from './test-server';
import { buildFirmwareVersion, buildModel } from './factories';
import { topics } from '#protocol/topics';

/** Device credentials as the claim returns them. */
export interface DeviceCreds {
  serial: string;
  username: string;
  password: string;
}

/**
 * Registers a model and a firmware version (once per account) and claims the serials through
 * REST. `firmware: null` claims without a firmware to install, so no OTA update is scheduled
 * (broker tests that are not about OTA stay independent of the OTA engine).
 */
export async function claimForMqtt(
  server: TestServer,
  account: TestAccount,
  serials: string[],
  options: { model?: string; firmware?: string | null } = {},
): Promise<DeviceCreds[]> {
  const model = options.model ?? 'LX-200';
  const firmware = options.firmware === undefined ? '1.0.0' : options.firmware;
  const knex = server.service.database.knex;
  const hasModel = await knex('models').where({ account_id: account.accountId, name: model }).first('id');
  if (!hasModel) {
    await buildModel(account, model);
    await buildFirmwareVersion(server, { accountId: account.accountId, model, version: firmware ?? '1.0.0' });
  }
  const res = await account.api.post('/api/v1/devices/claim', { serials, model, ...(firmware ? { firmware } : {}) });
  expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(201);
  return (res.body.devices as Array<{ serial: string; credentials: { username: string; password: string } }>).map(
    (d) => ({
      serial: d.serial,
      username: d.credentials.username,
      password: d.credentials.password,
    }),
  );
}

/** Protocol v1 connect options (docs/device-protocol.md "Connecting"): client id = username = serial, clean false, Last Will offline. */
export function deviceOptions(creds: DeviceCreds, extra: Partial<IClientOptions> = {}): IClientOptions {
  return {
    clientId: creds.serial,
    username: creds.username,
    password: creds.password,
    clean: false,
    keepalive: 30,
    reconnectPeriod: 0,
    connectTimeout: 5000,
    will: { topic: topics.status(creds.serial), payload: Buffer.from('{"state":"offline"}'), qos: 1, retain: false },
    ...extra,
  };
}

/** Connects and resolves once CONNACK accepted it; rejects with the refusal (error.code = return code). */
export function connectDevice(
  url: string,
  creds: DeviceCreds,
  extra: Partial<IClientOptions> = {},
): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect(url, deviceOptions(creds, extra));
    client.once('connect', () => resolve(client));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
    client.once('close', () => reject(new Error('closed before CONNACK')));
  });
}

/** The CONNACK return code of a refused connection (4 bad credentials, 2 identifier rejected...). */
export async function refusalCode(
  url: string,
  creds: DeviceCreds,
  extra: Partial<IClientOptions> = {},
): Promise<number | string> {
  try {
    const client = await connectDevice(url, creds, extra);
    await client.endAsync(true);
    return 0;
  } catch (err) {
    return (err as { code?: number }).code ?? (err as Error).message;
  }
}

/** Collects every message a client receives. */
export function collect(client: MqttClient): Array<{ topic: string; payload: string; retain: boolean }> {
  const seen: Array<{ topic: string; payload: string; retain: boolean }> = [];
  client.on('message', (topic, payload, packet) =>
    seen.push({ topic, payload: payload.toString(), retain: packet.retain }),
  );
  return seen;
}

export const heartbeat = (overrides: Record<string, unknown> = {}) =>
  JSON.stringify({ firmware: '1.0.0', ip: '10.0.4.17', uptime_s: 3600, rssi: -61, ...overrides });

/** Resolves when the socket is closed (the broker dropped us). */
export function closed(client: MqttClient, timeoutMs = 5000): Promise<boolean> {
  return new Promise((resolve) => {
    if (!client.connected) {
      resolve(true);
      return;
    }
    const timer = setTimeout(() => resolve(false), timeoutMs);
    client.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
