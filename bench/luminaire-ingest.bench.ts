import pg from 'pg';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import { openDatabase } from '#core/db/database';
import { createTransactionRunner } from '#core/db/transaction';
import { createServices } from '#core/services';
import { createLogger } from '#core/logger';
import { systemClock } from '#core/shared/clock';
import { HeartbeatIngest } from '#core/devices/heartbeat-ingest';
import { LuminaireIngest } from '#core/luminaire/luminaire-ingest';
import { readLuminaire } from '#protocol/luminaire-fields';
import { readHeartbeat } from '#protocol/heartbeat-fields';
import { Session } from 'node:inspector/promises';
import { PostgresBackendCpu } from './lib/postgres-cpu';
import { isSmoke, recordResults, type CurrentFigure } from './lib/results';

/**
 * Luminaire data (issue 29), on PostgreSQL:
 * 1. CPU per reading of 10,000 fixtures reporting every minute (167 readings/s, real time, the
 *    ingest's own 200 ms batches): parse and validation, batch write of reading, roll-ups and
 *    state, in the service process plus its PostgreSQL backends (from /proc). Baseline in the
 *    same run: heartbeats of the same 10,000 devices at the same rate through the heartbeat
 *    ingest. The MQTT transport is the same for both and not in either figure (see the device
 *    gateway benchmark for it). Target: at most 5 % of one core.
 * 2. A year of a device's hourly series (8,760 buckets among 200 devices' years): < 50 ms.
 * 3. Fleet energy per day over 90 days for 100,000 fixtures, from the daily fleet roll-ups seeded
 *    directly (4 models x 6 firmware versions x 50 sites; tags zone and building; and per model,
 *    firmware and site as the ingest writes them): < 200 ms.
 * Then the bytes each table takes per row, for docs/luminaire-data.md "Storage".
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/luminaire-ingest.bench.ts
 *   options: --smoke (tiny, records nothing) --dry (full size, records nothing) --keep (leave the database)
 *            --seconds N (of each paced ingest phase; default 60)
 *            --profile DIR (a V8 CPU profile of each measured phase, DIR/<phase>.cpuprofile; records nothing;
 *            read them with bench/lib/profile-summary.ts)
 */
const smoke = isSmoke();
const dry = process.argv.includes('--dry');
const adminUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const DEVICES = smoke ? 200 : 10_000;
const SECONDS = smoke ? 4 : Number(process.argv[process.argv.indexOf('--seconds') + 1]) || 60;
const RATE = DEVICES / 60;
const FLEET = smoke ? 2_000 : 100_000;
const SERIES_DEVICES = smoke ? 5 : 200;
const profileDir = process.argv.includes('--profile') ? process.argv[process.argv.indexOf('--profile') + 1] : undefined;
const profiler = profileDir ? new Session() : undefined;
/** Runs `work` under the V8 profiler when --profile is given (the phase's figures then include its overhead). */
const profiled = async <T>(phase: string, work: () => Promise<T>): Promise<T> => {
  if (!profiler || !profileDir) return work();
  await profiler.post('Profiler.enable');
  await profiler.post('Profiler.setSamplingInterval', { interval: 200 });
  await profiler.post('Profiler.start');
  try {
    return await work();
  } finally {
    const { profile } = await profiler.post('Profiler.stop');
    fs.mkdirSync(profileDir, { recursive: true });
    fs.writeFileSync(path.join(profileDir, `${phase}.cpuprofile`), JSON.stringify(profile));
  }
};
profiler?.connect();

const name = `fleet_bench_lum_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ connectionString: adminUrl });
await admin.connect();
await admin.query(`CREATE DATABASE ${name}`);
const url = new URL(adminUrl);
url.pathname = `/${name}`;
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-bench-lum-'));
const database = await openDatabase({ databaseUrl: url.toString(), dataDir, poolSize: 4 });
const logger = createLogger('warn');
const deps = {
  knex: database.knex,
  transaction: createTransactionRunner(database.knex, () => undefined),
  clock: systemClock,
  logger,
};
const figures: string[] = [];
const current: CurrentFigure[] = [];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

try {
  await database.migrate();
  const services = createServices(deps, { firmware: { dataDir, maxFirmwareBytes: 1 << 20 } });
  await services.luminairePartitions.maintain();
  const created = await services.accounts.create({
    name: 'Bench Lux',
    quota: FLEET + 10,
    budget: 10_000_000,
    currency: 'EUR',
    unitPrice: 1,
    adminEmail: `bench-${Date.now()}@example.test`,
    adminPassword: 'correct horse battery',
  });
  const actor = (await services.apiKeys.authenticate(created.apiKey))!.actor;
  await services.models.register(actor, { name: 'LX-B', description: '' });
  const serials = Array.from({ length: DEVICES }, (_, i) => `LUMB-${String(i).padStart(6, '0')}`);
  for (let i = 0; i < serials.length; i += 1000)
    await services.claims.claim(actor, { serials: serials.slice(i, i + 1000), model: 'LX-B' });
  const rows = await database
    .knex('devices')
    .where({ account_id: actor.accountId })
    .select<Array<{ id: string; serial: string }>>('id', 'serial');
  const pgCpu = await PostgresBackendCpu.open({ adminUrl, database: name });

  /** Runs `send(i)` at RATE per second for SECONDS, then `drain`; CPU µs of this process and of PostgreSQL. */
  const paced = async (send: (i: number) => void, drain: () => Promise<void>) => {
    await pgCpu.start();
    const before = process.cpuUsage();
    const started = performance.now();
    let sent = 0;
    while (sent < RATE * SECONDS) {
      const due = Math.floor(((performance.now() - started) / 1000) * RATE);
      while (sent < Math.min(due, RATE * SECONDS)) send(sent++);
      await new Promise((r) => setTimeout(r, 20));
    }
    await drain();
    const used = process.cpuUsage(before);
    return { sent, serviceUs: used.user + used.system, pgUs: await pgCpu.stop() };
  };

  /** CPU ms per run of `work` (service process + the database's PostgreSQL backends). */
  let lastSplit = '';
  const seriesCpuSplit = () => lastSplit;
  const cpuOf = async (work: () => Promise<void>, runs: number) => {
    await pgCpu.start();
    const before = process.cpuUsage();
    await work();
    const used = process.cpuUsage(before);
    const pgUs = await pgCpu.stop();
    lastSplit = `${((used.user + used.system) / runs / 1000).toFixed(1)} + PostgreSQL ${(pgUs / runs / 1000).toFixed(1)}`;
    return (used.user + used.system + pgUs) / runs / 1000;
  };

  // 1a. Heartbeats (the baseline): read and coalesced, written by the heartbeat ingest. One
  // unmeasured heartbeat per device first: a fleet reporting every minute is in its steady state,
  // and a device's first news costs more (its row changes status and connectivity).
  const heartbeats = new HeartbeatIngest({ presence: services.presence, clock: systemClock, logger });
  heartbeats.start();
  for (const d of rows) {
    const read = readHeartbeat(JSON.stringify({ firmware: '1.2.0', ip: '10.0.0.7', uptime_s: 0, rssi: -60 }));
    if (read.ok) heartbeats.heartbeat(d.id, read.values, read.refused);
  }
  await heartbeats.flush();
  const hb = await paced(
    (i) => {
      const read = readHeartbeat(JSON.stringify({ firmware: '1.2.0', ip: '10.0.0.7', uptime_s: i, rssi: -60 }));
      if (read.ok) heartbeats.heartbeat(rows[i % rows.length]!.id, read.values, read.refused);
    },
    () => heartbeats.stop(),
  );
  // 1b. Luminaire readings: every one stored, each promise settled at its batch's commit.
  const ingest = new LuminaireIngest({ deps, partitions: services.luminairePartitions });
  ingest.start();
  // One unmeasured reading per device first, as for heartbeats: in a fleet reporting every minute
  // a device's state row and its hour's and day's roll-up rows exist already (59 readings of 60
  // update them); without this every measured reading would pay their first insert.
  const warmUp: Array<Promise<void>> = [];
  for (const d of rows) {
    const read = readLuminaire(
      JSON.stringify({ at: new Date().toISOString(), energy_wh: 500, gear_operating_s: 1800, source_on_s: 1500 }),
      new Date(),
    );
    if (read.ok)
      warmUp.push(
        ingest.record({
          accountId: actor.accountId,
          deviceId: d.id,
          serial: d.serial,
          values: read.values,
          at: read.at,
          badClock: read.badClock,
          refused: read.refused,
        }),
      );
  }
  await ingest.flush();
  await Promise.all(warmUp);
  const pending: Array<Promise<void>> = [];
  const lum = await profiled('ingest', () =>
    paced(
      (i) => {
        const d = rows[i % rows.length]!;
        const read = readLuminaire(
          JSON.stringify({
            at: new Date().toISOString(),
            energy_wh: 1000 + i,
            power_w: 31.5,
            gear_operating_s: 3600 + i,
            gear_starts: 12,
            gear_temp_c: 48.5,
            supply_voltage_v: 231.2,
            source_on_s: 3000 + i,
            source_starts: 12,
            source_temp_c: 55.1,
            output_level_pct: 80,
            rated_life_h: 100000,
          }),
          new Date(),
        );
        if (read.ok)
          pending.push(
            ingest.record({
              accountId: actor.accountId,
              deviceId: d.id,
              serial: d.serial,
              values: read.values,
              at: read.at,
              badClock: read.badClock,
              refused: read.refused,
            }),
          );
      },
      async () => {
        await ingest.stop();
        await Promise.all(pending);
      },
    ),
  );
  const perPoint = (r: { sent: number; serviceUs: number; pgUs: number }) => (r.serviceUs + r.pgUs) / r.sent;
  const lumShare = (perPoint(lum) * (10_000 / 60)) / 1e6;
  figures.push(
    `heartbeats (baseline): ${hb.sent} at ${RATE.toFixed(0)}/s: ${(hb.serviceUs / hb.sent).toFixed(0)} µs service + ${(hb.pgUs / hb.sent).toFixed(0)} µs PostgreSQL per heartbeat`,
    `luminaire readings: ${lum.sent} at ${RATE.toFixed(0)}/s: ${(lum.serviceUs / lum.sent).toFixed(0)} µs service + ${(lum.pgUs / lum.sent).toFixed(0)} µs PostgreSQL per reading (${(perPoint(lum) / perPoint(hb)).toFixed(2)}x a heartbeat)`,
    `10,000 fixtures every minute: ${(lumShare * 100).toFixed(2)} % of one core (service + PostgreSQL), MQTT transport excluded`,
  );
  current.push({
    id: 'Luminaire ingest: 10,000 fixtures every minute (service + PostgreSQL CPU)',
    figure: `${(lumShare * 100).toFixed(2)} % of one core; ${perPoint(lum).toFixed(0)} µs per reading against ${perPoint(hb).toFixed(0)} µs per heartbeat (MQTT transport excluded)`,
    target: '<= 5 % of one core',
    met: lumShare <= 0.05,
  });

  // Storage: bytes per row of each table (heap + indexes + TOAST).
  const size = async (parent: string) => {
    const r = await database.knex.raw<{ rows: Array<{ bytes: string; n: string }> }>(
      `SELECT (SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = '${parent}'::regclass) AS bytes,
              (SELECT count(*) FROM ${parent}) AS n`,
    );
    return Number(r.rows[0]!.bytes) / Math.max(1, Number(r.rows[0]!.n));
  };
  await database.knex.raw('VACUUM ANALYZE luminaire_points, luminaire_hourly, luminaire_daily');
  const rawRow = await size('luminaire_points');
  const hourRow = await size('luminaire_hourly');
  const dayRow = await size('luminaire_daily');
  figures.push(
    `bytes per row (heap + indexes): raw reading ${rawRow.toFixed(0)}, hourly roll-up ${hourRow.toFixed(0)}, daily roll-up ${dayRow.toFixed(0)}`,
    `per fixture at the default 900 s: raw ${((96 * 30 * rawRow) / 1e6).toFixed(2)} MB (30 days kept), hourly ${((8760 * hourRow) / 1e6).toFixed(2)} MB (1 year kept), daily ${((365 * dayRow) / 1e3).toFixed(0)} KB per year kept`,
  );

  // 2. A year of hourly series: seeded directly, one partition per month.
  const now = new Date();
  const yearAgo = new Date(now.getTime() - 365 * 86_400_000);
  await services.luminairePartitions.ensureFor(
    Array.from({ length: 14 }, (_, m) => new Date(yearAgo.getTime() + m * 30 * 86_400_000)),
  );
  const seriesIds = rows.slice(0, SERIES_DEVICES).map((r) => r.id);
  await database.knex.raw(
    `INSERT INTO luminaire_hourly (device_id, bucket, attribution_id, account_id, points, energy_wh, power_sum, power_n, power_max,
                                   gear_temp_sum, gear_temp_n, gear_temp_max, lifetime_energy_wh, lifetime_burn_s)
     SELECT d, date_trunc('hour', ?::timestamptz) + make_interval(hours => h), 1, ?, 4, 120, 124, 4, 31, 190, 4, 48, 1000 + h * 120, 3600 * h
       FROM unnest(?::uuid[]) d, generate_series(0, 8759) h
     ON CONFLICT DO NOTHING`,
    [yearAgo, actor.accountId, seriesIds],
  );
  await database.knex.raw('ANALYZE luminaire_hourly');
  const seriesMs: number[] = [];
  const seriesCpu = await profiled('series', () =>
    cpuOf(
      async () => {
        for (let i = 0; i < (smoke ? 3 : 20); i++) {
          const t = performance.now();
          const s = await services.luminaire.series(actor, {
            serial: rows[i % SERIES_DEVICES]!.serial,
            from: yearAgo,
            to: now,
            resolution: 'hour',
          });
          seriesMs.push(performance.now() - t);
          if (s.points.length < 8700) throw new Error(`a year of hourly buckets came back as ${s.points.length}`);
        }
      },
      smoke ? 3 : 20,
    ),
  );
  figures.push(
    `a year of a device's hourly series (8,760 buckets, ${SERIES_DEVICES} devices' years in the table): median ${median(seriesMs).toFixed(1)} ms, worst ${Math.max(...seriesMs).toFixed(1)} ms (service call, JSON-ready objects); CPU per query ${seriesCpu.toFixed(1)} ms (service ${seriesCpuSplit()})`,
  );
  current.push({
    id: "Luminaire: a year of a device's hourly series",
    figure: `${median(seriesMs).toFixed(1)} ms median (CPU ${seriesCpu.toFixed(1)} ms per query, service + PostgreSQL)`,
    target: '< 50 ms',
    met: median(seriesMs) < 50,
  });

  // 3. Fleet energy per day, 90 days, FLEET fixtures: the roll-up rows such a fleet makes, seeded directly:
  // one per attribution (model x firmware x site) and day, one per tag value and day.
  const combos = 4 * 6 * 50;
  await database.knex.raw(
    `INSERT INTO luminaire_attributions (account_id, model, firmware, site_id, fingerprint)
     SELECT ?::uuid, 'LX-' || (i % 4), '1.' || ((i / 4) % 6) || '.0', md5('site' || (i / 24))::uuid, 'bench-' || i
       FROM generate_series(0, ?::int - 1) i`,
    [actor.accountId, combos],
  );
  const perCombo = FLEET / combos;
  await database.knex.raw(
    `INSERT INTO luminaire_fleet_daily (account_id, day, attribution_id, energy_wh, points)
     SELECT ?, current_date - d, a.id, ?::float * 400, (96 * ?::float)::int
       FROM luminaire_attributions a, generate_series(0, 89) d
      WHERE a.account_id = ? AND a.fingerprint LIKE 'bench-%'`,
    [actor.accountId, perCombo, perCombo, actor.accountId],
  );
  await database.knex.raw(
    `INSERT INTO luminaire_fleet_daily_tags (account_id, tag_key, day, tag_value, energy_wh, points)
     SELECT ?, k.key, current_date - d, k.key || v, ?::float * 400 / k.n, (96 * ?::float / k.n)::int
       FROM (VALUES ('zone', 20), ('building', 50)) AS k(key, n), generate_series(0, 89) d, generate_series(1, 50) v
      WHERE v <= k.n`,
    [actor.accountId, FLEET, FLEET],
  );
  // What the ingest writes beside them for grouping by model, firmware and site.
  await database.knex.raw(
    `INSERT INTO luminaire_fleet_daily_groups AS f (account_id, dimension, day, key, energy_wh, points)
     SELECT f.account_id, g.dimension, f.day, g.key, sum(f.energy_wh), sum(f.points)
       FROM luminaire_fleet_daily f
       JOIN luminaire_attributions a ON a.id = f.attribution_id AND a.account_id = f.account_id
      CROSS JOIN LATERAL (VALUES ('model', a.model), ('firmware', COALESCE(a.firmware, '')),
                                 ('site', COALESCE(a.site_id::text, ''))) AS g(dimension, key)
      WHERE f.account_id = ? AND a.fingerprint LIKE 'bench-%'
      GROUP BY 1, 2, 3, 4
     ON CONFLICT (account_id, dimension, day, key)
     DO UPDATE SET energy_wh = f.energy_wh + EXCLUDED.energy_wh, points = f.points + EXCLUDED.points`,
    [actor.accountId],
  );
  await database.knex.raw(
    'ANALYZE luminaire_fleet_daily, luminaire_fleet_daily_tags, luminaire_fleet_daily_groups, luminaire_attributions',
  );
  const from = new Date(now.getTime() - 89 * 86_400_000).toISOString().slice(0, 10);
  const to = now.toISOString().slice(0, 10);
  const energyMs: Record<string, number> = {};
  const energyCpu: Record<string, number> = {};
  for (const groupBy of [{ by: 'model' }, { by: 'firmware' }, { by: 'tag', key: 'zone' }] as const) {
    const times: number[] = [];
    const runs = smoke ? 2 : 10;
    const key = groupBy.by === 'tag' ? 'tag:zone' : groupBy.by;
    const cpu = await profiled(`energy-${key.replace(':', '-')}`, () =>
      cpuOf(async () => {
        for (let i = 0; i < runs; i++) {
          const t = performance.now();
          await services.luminaire.fleetEnergy(actor, { from, to, groupBy });
          times.push(performance.now() - t);
        }
      }, runs),
    );
    energyMs[key] = median(times);
    energyCpu[key] = cpu;
  }
  const worst = Math.max(...Object.values(energyMs));
  figures.push(
    `fleet energy per day, ${FLEET.toLocaleString('en')} fixtures over 90 days (${combos.toLocaleString('en')} attributions, ${(combos * 90).toLocaleString('en')} fleet roll-up rows): ${Object.entries(
      energyMs,
    )
      .map(([k, v]) => `${k} ${v.toFixed(1)} ms (CPU ${energyCpu[k]!.toFixed(1)} ms)`)
      .join(', ')} (median wall time; CPU per query, service + PostgreSQL)`,
  );
  current.push({
    id: 'Luminaire: fleet energy per day, 100,000 fixtures over 90 days',
    figure: `${worst.toFixed(0)} ms, worst grouping (median; CPU ${Math.max(...Object.values(energyCpu)).toFixed(0)} ms per query)`,
    target: '< 200 ms',
    met: worst < 200,
  });

  for (const f of figures) console.log(f);
  // Its own client on the admin database: left open, it kept the process from exiting.
  await pgCpu.close();
  if (!smoke && !dry && !profileDir)
    recordResults({
      title: `Luminaire data: ingest CPU, a year of hourly series, fleet energy (${DEVICES.toLocaleString('en')} fixtures)`,
      command: 'BENCH_DATABASE_URL=<postgres> node --import tsx bench/luminaire-ingest.bench.ts',
      figures,
      current,
    });
} finally {
  await database.close();
  if (process.argv.includes('--keep')) console.log(`kept database ${name}`);
  else await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
