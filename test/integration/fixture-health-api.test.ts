import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel, claimDevices, setReported } from '../helpers/factories';
import { uploadFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';
import { gql } from '../graphql/graphql-client';
import { ManualClock } from '#core/shared/clock';
import { LuminaireIngest } from '#core/luminaire/luminaire-ingest';
import { recordReadings } from '../helpers/luminaire-harness';
import { createLogger } from '#core/logger';

/**
 * Fixture health over REST (docs/fixture-health.md, docs/ota.md "Health gate"): the maintenance
 * list as JSON and CSV with its filters, the device's health on its record, a model's thresholds,
 * the warranty report, rates per firmware version, and a real deployment paused by the gate with
 * its evidence shown; another account sees none of it.
 */
describe('fixture health over REST', () => {
  const clock = new ManualClock('2026-11-20T00:00:00Z');
  let server: TestServer;
  let ingest: LuminaireIngest;
  let acme: TestAccount;
  let rival: TestAccount;
  const ids = new Map<string, string>();
  let pausedId = '';
  const HOUR = 3_600_000;

  beforeAll(async () => {
    server = await startTestServer({ clock });
    ingest = new LuminaireIngest({
      deps: { knex: server.service.database.knex, clock, logger: createLogger('silent') },
      partitions: server.service.services.luminairePartitions,
    });
    acme = await server.createAccount();
    rival = await server.createAccount();
    await buildModel(acme, 'LX-200');
    await buildModel(rival, 'LX-200');
    await claimDevices(acme, { serials: ['HA-1', 'HA-2', 'HA-3'], model: 'LX-200' });
    await claimDevices(rival, { serials: ['HR-1'], model: 'LX-200' });
    await server.service.database.knex('devices').where({ serial: 'HA-2' }).update({ name: '=cmd|"calc"' });
    expect((await acme.api.patch('/api/v1/devices/HA-1', { tags: { floor: '2' } })).status).toBe(200);
    const rows = await server.service.database.knex('devices').select('id', 'serial', 'account_id');
    for (const r of rows as Array<{ id: string; serial: string }>) ids.set(r.serial, r.id);
  }, 60_000);
  afterAll(() => ifStarted(server)?.close());

  /** One reading per device at the clock's time, then one flush. */
  async function readings(acc: TestAccount, values: Record<string, Record<string, unknown>>): Promise<void> {
    const at = clock.now().toISOString();
    const stamped = Object.fromEntries(Object.entries(values).map(([serial, payload]) => [serial, { at, ...payload }]));
    await recordReadings(ingest, clock, { accountId: acc.accountId, ids, readings: stamped });
  }

  it('lists unhealthy devices as JSON and as CSV, filtered by model and tag, and shows health on the device', async () => {
    // Seven days: HA-1 derates 12 times a day and runs hot; HA-2 fails its light source; HA-3 is quiet.
    for (let day = 0; day < 7; day++) {
      clock.set(new Date(Date.UTC(2026, 10, 20 + day, 12)).toISOString());
      await readings(acme, {
        'HA-1': {
          gear_thermal_derating: 12 * (day + 1),
          gear_temp_c: 80 + day,
          source_on_s: 20_000 * 3600 + day * 43_200,
        },
        'HA-2': {
          source_failures: day >= 5 ? 1 : 0,
          gear_temp_c: 50,
          source_on_s: 41_000 * 3600,
          energy_wh: 1000 * day,
        },
        'HA-3': { gear_thermal_derating: 0, gear_temp_c: 45, source_on_s: 1000 * 3600 },
      });
      await readings(rival, { 'HR-1': { source_failures: day, gear_temp_c: 95 } });
    }
    await server.service.healthWorker.runNow();

    const json = await acme.api.get('/api/v1/maintenance');
    expect(json.status).toBe(200);
    expect(json.body.counts).toEqual({ ok: 1, watch: 0, replace_soon: 1, failed: 1 });
    expect(json.body.items.map((i: { serial: string; state: string }) => [i.serial, i.state])).toEqual([
      ['HA-2', 'failed'],
      ['HA-1', 'replace_soon'],
    ]);
    expect(json.body.items[1].reasons[0]).toMatchObject({ rule: 'thermal_derating', state: 'replace_soon' });
    expect(json.body.items[1].tags).toEqual({ floor: '2' });

    const csv = await acme.api.get<string>('/api/v1/maintenance', { accept: 'text/csv' });
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    const lines = csv.body.split('\r\n');
    expect(lines[0]).toBe('serial,name,model,firmware,site,state,urgency,reasons,changed_at,tags');
    expect(lines).toHaveLength(4); // header, two devices, the empty string after the last CRLF
    // A name a spreadsheet would run as a formula is defused and, holding quotes, quoted.
    expect(lines[1]).toMatch(/^HA-2,"'=cmd\|""calc""",LX-200,,,failed,/);
    expect(lines[2]).toMatch(/^HA-1,.*,replace_soon,.*"?Thermal derating/i);

    const byTag = await acme.api.get('/api/v1/maintenance?tag=floor=2');
    expect(byTag.body.items.map((i: { serial: string }) => i.serial)).toEqual(['HA-1']);
    expect((await acme.api.get('/api/v1/maintenance?model=LX-900')).body.items).toEqual([]);
    expect((await acme.api.get('/api/v1/maintenance?site=00000000-0000-4000-8000-000000000000')).body.items).toEqual(
      [],
    );
    expect((await acme.api.get('/api/v1/maintenance?tag=floor')).status).toBe(422);
    expect((await acme.api.get('/api/v1/maintenance?site=downtown')).status).toBe(422);

    const device = await acme.api.get('/api/v1/devices/HA-2');
    expect(device.body.health).toMatchObject({ state: 'failed' });
    expect(device.body.health.reasons.map((r: { rule: string }) => r.rule)).toEqual(['source_failures', 'rated_life']);
    const quiet = await acme.api.get('/api/v1/devices/HA-3');
    expect(quiet.body.health).toMatchObject({ state: 'ok', reasons: [] });
  });

  it("sets a model's thresholds with PATCH and judges again at once; refuses contradictions", async () => {
    const set = await acme.api.patch('/api/v1/models/LX-200', {
      health_thresholds: { gear_temp_watch_c: 100, gear_temp_replace_c: 110, derating_replace_per_day: 50 },
    });
    expect(set.status).toBe(200);
    expect(Object.keys(set.body.health_thresholds)).toHaveLength(3);
    expect(set.body).toMatchObject({
      model: 'LX-200',
      health_thresholds: { gear_temp_watch_c: 100, gear_temp_replace_c: 110, derating_replace_per_day: 50 },
      effective_thresholds: { gear_temp_replace_c: 110, rated_life_h: 50_000 },
    });
    expect((await acme.api.get('/api/v1/devices/HA-1')).body.health.state).toBe('watch');
    const bad = await acme.api.patch('/api/v1/models/LX-200', { health_thresholds: { gear_temp_watch_c: 120 } });
    expect(bad.status).toBe(422);
    expect((await acme.api.patch('/api/v1/models/LX-200', { health_thresholds: { colour: 1 } })).status).toBe(422);
    expect((await acme.api.patch('/api/v1/models/LX-900', { health_thresholds: {} })).status).toBe(404);
    const reset = await acme.api.patch('/api/v1/models/LX-200', { health_thresholds: null });
    expect(reset.body.health_thresholds).toEqual({});
    expect(
      (await acme.api.get('/api/v1/models/LX-200/health-thresholds')).body.effective_thresholds.gear_temp_watch_c,
    ).toBe(75);
    expect((await acme.api.get('/api/v1/devices/HA-1')).body.health.state).toBe('replace_soon');
    // The rival's own LX-200 keeps its defaults.
    expect((await rival.api.get('/api/v1/models/LX-200/health-thresholds')).body.health_thresholds).toEqual({});
  });

  it('answers the warranty report and the rates per firmware version', async () => {
    const report = await acme.api.get('/api/v1/devices/HA-1/warranty-report');
    expect(report.status).toBe(200);
    expect(report.body).toMatchObject({ serial: 'HA-1', model: 'LX-200', warranty_years: 5 });
    expect(report.body.operating_hours).toBeGreaterThan(20_000);
    expect(report.body.fault_counters).toEqual([
      expect.objectContaining({ month: '2026-11', days: 7, thermal_derating: 72 }),
    ]);

    const rates = await acme.api.get('/api/v1/firmware-rates?from=2026-11-19T00:00:00Z&to=2026-11-28T00:00:00Z');
    expect(rates.status).toBe(200);
    expect(rates.body.versions).toEqual([
      expect.objectContaining({ model: 'LX-200', firmware: null, devices: 3, device_days: 21 }),
    ]);
    expect(rates.body.versions[0].events.thermal_derating).toBe(72);
    // These devices never connected (readings only): no connection days, so reboots are not measured.
    expect(rates.body.versions[0].connected_device_days).toBe(0);
    expect(rates.body.versions[0].per_1000_device_days.unexpected_reboots).toBeNull();
    expect(
      (await acme.api.get('/api/v1/firmware-rates?from=2026-11-28T00:00:00Z&to=2026-11-19T00:00:00Z')).status,
    ).toBe(422);
  });

  it("keeps each account's health to itself", async () => {
    const list = await rival.api.get('/api/v1/maintenance');
    expect(list.body.items.map((i: { serial: string }) => i.serial)).toEqual(['HR-1']);
    const csv = await rival.api.get<string>('/api/v1/maintenance', { accept: 'text/csv' });
    expect(csv.body).not.toContain('HA-');
    expect((await rival.api.get('/api/v1/devices/HA-1/warranty-report')).status).toBe(404);
    expect((await acme.api.get('/api/v1/devices/HR-1/warranty-report')).status).toBe(404);
    const rates = await rival.api.get('/api/v1/firmware-rates?from=2026-11-19T00:00:00Z&to=2026-11-28T00:00:00Z');
    expect(rates.body.versions).toEqual([expect.objectContaining({ devices: 1 })]);
    expect((await acme.api.get('/api/v1/deployments/00000000-0000-4000-8000-000000000000/fixture-gate')).status).toBe(
      404,
    );
    expect((await acme.api.get('/api/v1/deployments/not-a-uuid/fixture-gate')).status).toBe(404);
  });

  it('pauses a running deployment whose updated fixtures derate far more than control, with the evidence shown', async () => {
    const knex = server.service.database.knex;
    await buildModel(acme, 'GW-10');
    for (const v of ['1.0.0', '2.0.0']) await uploadFirmware(acme, { model: 'GW-10', version: v, expectStatus: 201 });
    const fleet = ['GA-1', 'GA-2', 'GA-3', 'GA-4', 'GA-5', 'GA-6'];
    await claimDevices(acme, { serials: fleet, model: 'GW-10' });
    const claimed = await knex<{ id: string; serial: string }>('devices')
      .whereIn('serial', fleet)
      .select('id', 'serial');
    for (const r of claimed) ids.set(r.serial, r.id);
    await setReported(knex, { accountId: acme.accountId, serials: fleet, state: { firmware: '1.0.0' } });
    clock.set('2026-12-01T00:00:00Z');
    const deploy = await acme.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { model: 'GW-10' },
      rollout: {
        fixture_signals: ['thermal_derating', 'supply_faults'],
        fixture_max_ratio: 1.5,
        fixture_min_device_days: 4,
      },
    });
    expect(deploy.status, JSON.stringify(deploy.body)).toBe(202);
    const id = deploy.body.deployment_id as string;
    pausedId = id;
    // Three devices installed it (as their heartbeats would say); three have not yet.
    const canary = fleet.slice(0, 3);
    const control = fleet.slice(3);
    await setReported(knex, { accountId: acme.accountId, serials: canary, state: { firmware: '2.0.0' } });

    // One reading an hour for two days: the canary derates 3 times an hour, control once every 6 hours.
    for (let h = 1; h <= 48; h++) {
      clock.set(new Date(Date.parse('2026-12-01T00:30:00Z') + h * HOUR).toISOString());
      await readings(acme, {
        ...Object.fromEntries(canary.map((s) => [s, { gear_thermal_derating: 3 * h, supply_undervoltage: 0 }])),
        ...Object.fromEntries(
          control.map((s) => [s, { gear_thermal_derating: Math.floor(h / 6), supply_undervoltage: 0 }]),
        ),
      });
      if (h === 12) {
        // Half a day in: too little exposure (a quarter of the device-days) to judge; nothing pauses.
        await server.service.healthWorker.runNow();
        const early = await acme.api.get(`/api/v1/deployments/${id}/fixture-gate`);
        expect(early.body).toMatchObject({ gated: true, current: { state: 'insufficient_exposure' } });
        expect((await acme.api.get(`/api/v1/firmware/deployments/${id}`)).body.deployment.status).toBe('running');
      }
    }
    await server.service.healthWorker.runNow();

    const detail = await acme.api.get(`/api/v1/firmware/deployments/${id}`);
    expect(detail.body.deployment).toMatchObject({ status: 'paused', paused_reason: 'fixture_health' });
    const gate = await acme.api.get(`/api/v1/deployments/${id}/fixture-gate`);
    expect(gate.status).toBe(200);
    expect(gate.body.recorded.paused_at).toBe(clock.now().toISOString());
    const decision = gate.body.recorded.decision;
    expect(decision).toMatchObject({ state: 'pause', compared_with: 'control', updated: { devices: 3 } });
    const derating = decision.signals.find((s: { signal: string }) => s.signal === 'thermal_derating');
    expect(derating.verdict).toBe('worse');
    expect(derating.ratio).toBeGreaterThan(10);
    expect(decision.signals.find((s: { signal: string }) => s.signal === 'supply_faults').verdict).toBe(
      'too_few_events',
    );
    expect(decision.summary).toMatch(/^thermal derating: .* per 1,000 device-days updated against/);
    const events = await knex('events').where({ account_id: acme.accountId, type: 'deployment.paused', subject: id });
    expect(events).toHaveLength(1);
    expect(events[0].data).toMatchObject({ reason: 'fixture_health', fixture_gate: { state: 'pause' } });
    expect((await rival.api.get(`/api/v1/deployments/${id}/fixture-gate`)).status).toBe(404);
  });

  it('answers the same over GraphQL, and sets thresholds with a mutation', async () => {
    const query = `{
      device(serial: "HA-2") { health { state reasons { rule text } } }
      maintenance(model: "GW-10") { counts { ok replaceSoon failed } items { serial state urgency } }
      warrantyReport(serial: "HA-1") { serial warrantyYears faultCounters { month thermalDerating } }
      firmwareRates(from: "2026-11-19T00:00:00Z", to: "2026-11-28T00:00:00Z", model: "LX-200") {
        firmware devices deviceDays connectedDeviceDays per1000DeviceDays { thermalDerating unexpectedReboots } }
      deployment(id: "${pausedId}") { rollout { fixtureSignals fixtureMaxRatio }
        fixtureGate { gated recorded { pausedAt decision { state comparedWith signals { signal verdict } } } } }
    }`;
    const res = await gql(server.service.httpUrl, query, { apiKey: acme.apiKey });
    expect(res.body.errors).toBeUndefined();
    const d = res.body.data;
    // The same verdicts as REST (the days since moved HA-2's failure out of the look-back window).
    const rest = (await acme.api.get('/api/v1/devices/HA-2')).body.health;
    expect(d.device.health).toEqual({
      state: rest.state,
      reasons: rest.reasons.map((r: { rule: string; text: string }) => ({ rule: r.rule, text: r.text })),
    });
    const restList = (await acme.api.get('/api/v1/maintenance?model=GW-10')).body;
    expect(d.maintenance).toEqual({
      counts: { ok: restList.counts.ok, replaceSoon: restList.counts.replace_soon, failed: restList.counts.failed },
      items: restList.items.map((i: { serial: string; state: string; urgency: number }) => ({
        serial: i.serial,
        state: i.state,
        urgency: i.urgency,
      })),
    });
    // The canary derates 72 times a day (replace soon), control 4 times (watch): the canary first.
    const states = d.maintenance.items.map((i: { serial: string; state: string }) => `${i.serial} ${i.state}`);
    expect(states.slice(0, 3).sort()).toEqual(['GA-1 replace_soon', 'GA-2 replace_soon', 'GA-3 replace_soon']);
    expect(states.slice(3).sort()).toEqual(['GA-4 watch', 'GA-5 watch', 'GA-6 watch']);
    expect(d.warrantyReport).toMatchObject({
      serial: 'HA-1',
      warrantyYears: 5,
      faultCounters: [{ month: '2026-11', thermalDerating: 72 }],
    });
    expect(d.firmwareRates).toEqual([
      {
        firmware: null,
        devices: 3,
        deviceDays: 21,
        connectedDeviceDays: 0,
        per1000DeviceDays: { thermalDerating: expect.closeTo(3428.57, 1), unexpectedReboots: null },
      },
    ]);
    expect(d.deployment.rollout).toEqual({
      fixtureSignals: ['thermal_derating', 'supply_faults'],
      fixtureMaxRatio: 1.5,
    });
    expect(d.deployment.fixtureGate).toMatchObject({
      gated: true,
      recorded: {
        decision: {
          state: 'pause',
          comparedWith: 'control',
          signals: [{ signal: 'thermal_derating', verdict: 'worse' }, {}],
        },
      },
    });

    const set = await gql(
      server.service.httpUrl,
      'mutation { setModelHealthThresholds(model: "LX-200", overrides: { gear_temp_watch_c: 85 }) { overrides effective } }',
      { apiKey: acme.apiKey },
    );
    expect(set.body.data.setModelHealthThresholds.overrides).toEqual({ gear_temp_watch_c: 85 });
    const bad = await gql(
      server.service.httpUrl,
      'mutation { setModelHealthThresholds(model: "LX-200", overrides: { gear_temp_watch_c: 95 }) { overrides } }',
      { apiKey: acme.apiKey },
    );
    expect(JSON.stringify(bad.body.errors)).toContain('validation_failed');

    const rival$ = await gql(
      server.service.httpUrl,
      `{ warrantyReport(serial: "HA-1") { serial } maintenance { items { serial } } deployment(id: "${pausedId}") { id } }`,
      { apiKey: rival.apiKey },
    );
    // HR-1's failures are past the look-back window by now, but its failure counter never restarted:
    // still failed (docs/fixture-health.md "Failed sticks"); the rival never sees acme's devices.
    expect(rival$.body.data).toEqual({
      warrantyReport: null,
      maintenance: { items: [{ serial: 'HR-1' }] },
      deployment: null,
    });
  });

  it('reads the health of a list of devices in one statement, each device its own verdict', async () => {
    const knex = server.service.database.knex;
    let statements = 0;
    const onQuery = (q: { sql: string }) => {
      if (/device_health/.test(q.sql)) statements += 1;
    };
    knex.on('query', onQuery);
    const res = await gql(
      server.service.httpUrl,
      '{ devices(first: 50) { edges { node { serial health { state } } } } }',
      { apiKey: acme.apiKey },
    );
    knex.off('query', onQuery);
    expect(res.body.errors).toBeUndefined();
    const edges = res.body.data.devices.edges as Array<{ node: { serial: string; health: { state: string } | null } }>;
    expect(edges.length).toBeGreaterThanOrEqual(3);
    expect(statements).toBe(1);
    for (const serial of ['HA-1', 'HA-2', 'HA-3']) {
      const rest = (await acme.api.get(`/api/v1/devices/${serial}`)).body.health as { state: string } | null;
      expect(edges.find((e) => e.node.serial === serial)?.node.health?.state ?? null).toBe(rest?.state ?? null);
    }
  });
});
