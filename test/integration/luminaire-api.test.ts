import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { MqttClient } from 'mqtt';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { claimForMqtt, connectDevice, type DeviceCreds } from '../helpers/mqtt';
import { gql, wsClient, collect } from '../graphql/graphql-client';
import { ifStarted } from '../helpers/teardown';
import { topics } from '#protocol/topics';

/**
 * A device following docs/device-protocol.md "Luminaire data" shows up in its series, on its
 * device record, in fleet energy and in the live subscription, through REST and GraphQL alike;
 * another account sees none of it, and a reading outside the device's own topic is refused.
 */
describe('luminaire data over MQTT, REST and GraphQL', () => {
  let server: TestServer;
  let acme: TestAccount;
  let rival: TestAccount;
  let device: DeviceCreds;
  let client: MqttClient;

  const publish = (topic: string, payload: Record<string, unknown>) =>
    new Promise<void>((resolve, reject) =>
      client.publish(topic, JSON.stringify(payload), { qos: 1 }, (err) => (err ? reject(err) : resolve())),
    );

  beforeAll(async () => {
    server = await startTestServer();
    acme = await server.createAccount();
    rival = await server.createAccount();
    device = (await claimForMqtt(server, acme, ['LUX-API-1'], { firmware: null }))[0]!;
    await claimForMqtt(server, rival, ['LUX-RIVAL-1'], { firmware: null });
    client = await connectDevice(`mqtt://127.0.0.1:${server.service.mqttPort}`, device);
  }, 60_000);
  afterAll(async () => {
    client.end(true);
    await ifStarted(server)?.close();
  });

  it('stores a reading before its PUBACK and shows it in the series, the device record and fleet energy', async () => {
    const now = Date.now();
    await publish(topics.luminaire('LUX-API-1'), {
      at: new Date(now - 60_000).toISOString(),
      energy_wh: 1000,
      power_w: 30,
      source_on_s: 36_000,
      rated_life_h: 50_000,
    });
    // PUBACK came: the reading is stored already (no waiting).
    await publish(topics.luminaire('LUX-API-1'), {
      at: new Date(now).toISOString(),
      energy_wh: 1500,
      power_w: 31,
      gear_temp_c: 'hot',
    });
    const raw = await acme.api.get<{ points: Array<Record<string, unknown>> }>(
      '/api/v1/devices/LUX-API-1/luminaire?resolution=raw',
    );
    expect(raw.status).toBe(200);
    expect(raw.body.points.map((p) => p.power_w)).toEqual([30, 31]);
    const record = await acme.api.get<{ luminaire: Record<string, unknown> }>('/api/v1/devices/LUX-API-1');
    expect(record.body.luminaire).toMatchObject({
      lifetime_energy_kwh: 1.5,
      burn_hours: 10,
      rated_life_h: 50_000,
      points: 2,
      refused_fields: { gear_temp_c: { count: 1, reason: 'wrong_type', value: 'hot' } },
    });
    const today = new Date(now).toISOString().slice(0, 10);
    const energy = await acme.api.get<{ groups: Array<{ key: string; total_kwh: number }> }>(
      `/api/v1/energy?from=${today}&to=${today}`,
    );
    expect(energy.status).toBe(200);
    expect(energy.body.groups).toEqual([{ key: 'LX-200', total_kwh: 0.5, kwh: [0.5] }]);

    const graph = await gql(
      server.service.httpUrl,
      `{ device(serial: "LUX-API-1") { luminaire { lifetimeEnergyKwh burnHours refusedFields { field reason } }
           luminaireSeries(resolution: raw) { readings { values { powerW } } } }
         fleetEnergy(from: "${today}", to: "${today}") { groups { key totalKwh } } }`,
      { apiKey: acme.apiKey },
    );
    expect(graph.body.errors).toBeUndefined();
    expect(graph.body.data.device.luminaire).toEqual({
      lifetimeEnergyKwh: 1.5,
      burnHours: 10,
      refusedFields: [{ field: 'gear_temp_c', reason: 'wrong_type' }],
    });
    expect(
      graph.body.data.device.luminaireSeries.readings.map((r: { values: { powerW: number } }) => r.values.powerW),
    ).toEqual([30, 31]);
    expect(graph.body.data.fleetEnergy.groups).toEqual([{ key: 'LX-200', totalKwh: 0.5 }]);
  });

  it('reads the luminaire summaries of a list of devices in one statement (DataLoader)', async () => {
    await claimForMqtt(server, acme, ['LUX-API-2', 'LUX-API-3'], { firmware: null });
    const knex = server.service.database.knex;
    const count = async (first: number) => {
      let statements = 0;
      const onQuery = (q: { sql: string }) => {
        if (/luminaire_state/.test(q.sql)) statements += 1;
      };
      knex.on('query', onQuery);
      const res = await gql(
        server.service.httpUrl,
        `{ devices(first: ${first}) { edges { node { serial luminaire { lifetimeEnergyKwh } } } } }`,
        { apiKey: acme.apiKey },
      );
      knex.off('query', onQuery);
      expect(res.body.errors).toBeUndefined();
      const edges = res.body.data.devices.edges as Array<{ node: { serial: string; luminaire: unknown } }>;
      return { statements, luminaire: Object.fromEntries(edges.map((e) => [e.node.serial, e.node.luminaire])) };
    };
    const one = await count(1);
    const three = await count(3);
    expect(one.statements).toBe(1);
    expect(three.statements).toBe(1);
    // Each device still gets its own summary: null before its first reading.
    expect(three.luminaire).toEqual({
      'LUX-API-1': { lifetimeEnergyKwh: 1.5 },
      'LUX-API-2': null,
      'LUX-API-3': null,
    });
  });

  it('pushes live readings to a subscriber of the device', async () => {
    const ws = wsClient(server.service.httpUrl, { apiKey: acme.apiKey });
    const live = collect<{ data: { luminaireReadings: { values: { powerW: number } } } }>(
      ws,
      'subscription { luminaireReadings(serial: "LUX-API-1") { at values { powerW } } }',
    );
    try {
      // The subscription is set up once the server answered it; readings until one arrives.
      for (let i = 0; live.items.length === 0 && i < 50; i++) {
        await publish(topics.luminaire('LUX-API-1'), { power_w: 40 + i, at: new Date().toISOString() });
        await new Promise((r) => setTimeout(r, 100));
      }
      await live.until(() => live.items.length > 0);
      expect(live.items[0]!.data.luminaireReadings.values.powerW).toBeGreaterThanOrEqual(40);
    } finally {
      live.dispose();
      await ws.dispose();
    }
  });

  it("keeps each account's luminaire data to itself", async () => {
    expect((await rival.api.get('/api/v1/devices/LUX-API-1/luminaire')).status).toBe(404);
    const today = new Date().toISOString().slice(0, 10);
    const energy = await rival.api.get<{ groups: unknown[] }>(`/api/v1/energy?from=${today}&to=${today}`);
    expect(energy.body.groups).toEqual([]);
    const graph = await gql(server.service.httpUrl, '{ device(serial: "LUX-API-1") { luminaire { points } } }', {
      apiKey: rival.apiKey,
    });
    expect(graph.body.data.device).toBeNull();
    const ws = wsClient(server.service.httpUrl, { apiKey: rival.apiKey });
    const live = collect(ws, 'subscription { luminaireReadings(serial: "LUX-API-1") { at } }');
    try {
      await live.until(() => live.done);
      expect(JSON.stringify([...live.items, ...live.errors])).toContain('not_found');
    } finally {
      live.dispose();
      await ws.dispose();
    }
  });

  it("refuses a reading on another device's topic and bad queries with 422", async () => {
    await publish(topics.luminaire('LUX-RIVAL-1'), { power_w: 1 });
    const rivalSeries = await rival.api.get<{ points: unknown[] }>(
      '/api/v1/devices/LUX-RIVAL-1/luminaire?resolution=raw',
    );
    expect(rivalSeries.body.points).toEqual([]);
    for (const query of [
      'resolution=minute',
      'from=yesterday',
      'from=2026-01-01T00:00:00Z&to=2026-12-31T00:00:00Z&resolution=raw',
    ])
      expect((await acme.api.get(`/api/v1/devices/LUX-API-1/luminaire?${query}`)).status).toBe(422);
    for (const query of ['group_by=colour', 'from=2026-13-01'])
      expect((await acme.api.get(`/api/v1/energy?${query}`)).status).toBe(422);
  });
});
