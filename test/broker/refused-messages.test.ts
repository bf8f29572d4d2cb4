import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import mqtt, { type MqttClient } from 'mqtt';
import { topics } from '#protocol/topics';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { claimForMqtt, deviceOptions, heartbeat, type DeviceCreds } from '../helpers/mqtt';
import { gql } from '../graphql/graphql-client';
import { ifStarted } from '../helpers/teardown';

/**
 * What a firmware team sees on the wire when a device gets a topic or a field wrong, with a real
 * mqtt.js client over TCP against the whole service: a refused publish is acknowledged and never
 * makes a persistent-session client reconnect and resend it; a partial heartbeat is heard; both are
 * counted on the device in the REST API and in GraphQL.
 */
describe('refused messages and fields: no reconnect loop, visible per device', () => {
  let server: TestServer;
  let account: TestAccount;
  let url: string;
  let creds: Map<string, DeviceCreds>;
  const clients: MqttClient[] = [];

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    const claimed = await claimForMqtt(server, account, ['LOOP-1', 'FIELDS-1'], { firmware: null });
    creds = new Map(claimed.map((c) => [c.serial, c]));
    url = `mqtt://127.0.0.1:${server.service.mqttPort}`;
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await ifStarted(server)?.close();
  });

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  /** Resolves 'puback', or 'no puback' when none came within `ms`. */
  const acknowledged = (work: Promise<unknown>, ms = 2000) =>
    Promise.race([
      work.then(
        () => 'puback',
        () => 'no puback',
      ),
      sleep(ms).then(() => 'no puback'),
    ]);
  const until = async (what: () => boolean, ms = 5000) => {
    const end = Date.now() + ms;
    while (!what() && Date.now() < end) await sleep(20);
    return what();
  };

  it('a compliant clean=false client that publishes once to a wrong topic stays connected and does not resend it after a reconnect', async () => {
    const c = creds.get('LOOP-1')!;
    const wrong = `devices/${c.serial}/heartbeats`;
    // Reconnects on its own, as firmware does; a persistent session resends unacknowledged QoS 1 publishes.
    const client = mqtt.connect(url, deviceOptions(c, { reconnectPeriod: 100 }));
    clients.push(client);
    let connects = 0;
    let wrongSent = 0;
    client.on('connect', () => (connects += 1));
    client.on('packetsend', (p) => {
      if (p.cmd === 'publish' && p.topic === wrong) wrongSent += 1;
    });
    expect(await until(() => connects === 1)).toBe(true);

    expect(await acknowledged(client.publishAsync(wrong, heartbeat(), { qos: 1 }))).toBe('puback');
    // Before: closed without a PUBACK, then 5 to 20 connect/close cycles in a few seconds, for ever.
    await sleep(1000);
    expect(connects).toBe(1);
    expect(client.connected).toBe(true);

    // A network blip: the client reconnects with its session and resends what is unacknowledged: nothing.
    client.stream.destroy();
    expect(await until(() => connects === 2)).toBe(true);
    await sleep(500);
    expect(wrongSent).toBe(1);
    expect(connects).toBe(2);

    await server.service.ingest.flush();
    const res = await account.api.get(`/api/v1/devices/${c.serial}`);
    expect(res.status).toBe(200);
    expect(res.body.refused_messages).toEqual({ topic_not_allowed: 1 });
    expect(res.body.last_refused_message).toMatchObject({ reason: 'topic_not_allowed', topic: wrong });
    const metrics = await (await fetch(`${server.service.httpUrl}/metrics`)).text();
    expect(metrics).toMatch(/fleet_mqtt_publishes_refused_total\{reason="not_a_device_topic"\} 1/);
  });

  it('a heartbeat with invalid fields keeps the device heard and shows each refused field in REST and GraphQL', async () => {
    const c = creds.get('FIELDS-1')!;
    const client = mqtt.connect(url, deviceOptions(c));
    clients.push(client);
    await new Promise((resolve) => client.once('connect', resolve));
    await client.publishAsync(topics.heartbeat(c.serial), heartbeat({ firmware: '1.4.0' }), { qos: 1 });
    await client.publishAsync(
      topics.heartbeat(c.serial),
      JSON.stringify({ firmware: 'v1.4.1', ip: '2001:db8::17', uptime_s: 7200, rssi: -55.5 }),
      { qos: 1 },
    );
    await client.publishAsync(topics.heartbeat(c.serial), '[]', { qos: 1 });
    await server.service.ingest.flush();

    const res = await account.api.get(`/api/v1/devices/${c.serial}`);
    expect(res.body).toMatchObject({
      status: 'online',
      firmware: '1.4.0',
      firmware_reported_invalid: 'v1.4.1',
      ip: '2001:db8::17',
      uptime_s: 7200,
      rssi: -55,
      refused_messages: { not_object: 1 },
      last_refused_message: { reason: 'not_object', topic: topics.heartbeat(c.serial) },
      refused_fields: { firmware: { count: 1, reason: 'invalid_format', value: 'v1.4.1' } },
    });
    const list = await account.api.get(`/api/v1/devices?q=FIELDS-1`);
    // The luminaire summary and the health verdict are the record's only (docs/rest-devices.md).
    const { luminaire: _luminaire, health: _health, ...listed } = res.body;
    expect(list.body.devices[0]).toEqual(listed);

    const q = await gql(
      server.service.httpUrl,
      `query($serial: String!) { device(serial: $serial) {
         firmware firmwareReportedInvalid
         refusedFields { field reason count value at }
         refusedMessages { reason count }
         lastRefusedMessage { reason topic at }
       } }`,
      { apiKey: account.apiKey, variables: { serial: c.serial } },
    );
    expect(q.body.errors).toBeUndefined();
    expect(q.body.data.device).toMatchObject({
      firmware: '1.4.0',
      firmwareReportedInvalid: 'v1.4.1',
      refusedFields: [{ field: 'firmware', reason: 'invalid_format', count: 1, value: 'v1.4.1' }],
      refusedMessages: [{ reason: 'not_object', count: 1 }],
      lastRefusedMessage: { reason: 'not_object', topic: topics.heartbeat(c.serial) },
    });
  });
});
