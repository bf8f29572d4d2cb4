import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel, serials } from '../helpers/factories';
import { claimWithCredentials, deployment, startSimulated, uploadFirmware } from './ota-helpers';
import { ifStarted } from '../helpers/teardown';
import { DeltaCache } from '#core/firmware/delta/delta-cache';
import type { DeltaJob } from '#core/firmware/delta/delta-worker';
import type { BuiltDelta } from '#core/firmware/delta/delta-builder';
import type { ServiceDeps } from '#core/service-deps';

/**
 * Delta images end to end (docs/ota.md "Delta images"): built once in a worker, offered in the
 * OTA command, applied by simulated modules (BSDIFF40, result sha256 checked), the fallback to
 * the full image after `delta_apply`, the size cap, and the delta link's isolation.
 */
describe('delta images', { timeout: 180_000 }, () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;
  const poll = { timeout: 60_000, interval: 200 };
  const v1 = randomBytes(200_000);
  // A patch release: a few bytes changed here and there, a block inserted, a tail appended.
  const v2 = Buffer.concat([
    v1.subarray(0, 50_000),
    Buffer.from('new feature block'),
    v1.subarray(50_000),
    randomBytes(2_000),
  ]);
  for (let i = 0; i < v2.length; i += 9_973) v2[i] = v2[i]! ^ 0x5a;

  beforeAll(async () => {
    server = await startTestServer({ env: { OTA_SWEEP_INTERVAL_MS: '250', OTA_RESEND_AFTER_S: '3' } });
    a = await server.createAccount({ quota: 100, budget: 1000, rateLimitPerMinute: 1_000_000 });
    b = await server.createAccount({ quota: 100, budget: 1000, rateLimitPerMinute: 1_000_000 });
    // Account B has images of its own (a cached delta is shared by content: B's job gets B's delta).
    const images = new Map([
      [a, [v1, v2]],
      [b, [randomBytes(1_000), randomBytes(1_000)]],
    ]);
    for (const [acc, [old, neu]] of images) {
      await buildModel(acc, 'LX-200');
      await uploadFirmware(acc, { model: 'LX-200', version: '1.0.0', bytes: old!, expectStatus: 201 });
      await uploadFirmware(acc, { model: 'LX-200', version: '1.1.0', bytes: neu!, expectStatus: 201 });
    }
  }, 120_000);
  afterAll(() => ifStarted(server)?.close());

  const knex = () => server.service.database.knex;

  /** Devices on 1.0.0 that have said so (a delta needs the version they run), then offline. */
  async function devicesOn100(acc: TestAccount, prefix: string, n: number) {
    const creds = await claimWithCredentials(acc, { serials: serials(prefix, n), model: 'LX-200', firmware: '1.0.0' });
    const sims = await startSimulated(server, creds, { firmware: '1.0.0' });
    await expect
      .poll(
        async () => (await knex()('devices').whereIn('serial', serials(prefix, n)).whereNotNull('firmware')).length,
        poll,
      )
      .toBe(n);
    await Promise.all(sims.map((d) => d.stop()));
    return creds;
  }

  const deploy = async (acc: TestAccount, list: string[]) => {
    const res = await acc.api.post('/api/v1/firmware/deploy', {
      firmware_version: '1.1.0',
      serials: list,
      filter: { model: 'LX-200' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    return res.body.deployment_id as string;
  };
  const readyDelta = async () => {
    await expect.poll(async () => (await knex()('firmware_deltas').where({ status: 'ready' })).length, poll).toBe(1);
    return knex()('firmware_deltas').first();
  };
  const updatesOf = (deploymentId: string) =>
    knex()('device_updates').where({ deployment_id: deploymentId }).orderBy('id');

  it('builds the delta once, offers it, and the simulated module applies it and installs the exact image', async () => {
    const creds = await devicesOn100(a, 'DA', 2);
    // The dry run lists the delta per version the targets run, and starts building it.
    const body = { firmware_version: '1.1.0', serials: serials('DA', 2), filter: { model: 'LX-200' }, dry_run: true };
    const dry = await a.api.post('/api/v1/firmware/deploy', body);
    expect(dry.status).toBe(200);
    expect(dry.body.deltas).toEqual([
      { from_version: '1.0.0', devices: 2, status: 'will_be_built', delta_size: null, full_size: v2.length },
    ]);
    const delta = await readyDelta();
    const again = await a.api.post('/api/v1/firmware/deploy', body);
    expect(again.body.deltas).toEqual([
      { from_version: '1.0.0', devices: 2, status: 'ready', delta_size: Number(delta.size), full_size: v2.length },
    ]);
    const id = await deploy(a, serials('DA', 2));
    expect(delta).toMatchObject({ format: 'bsdiff40', status: 'ready' });
    expect(Number(delta.to_size)).toBe(v2.length);
    expect(Number(delta.size)).toBeLessThan(v2.length / 5);
    const images = new Map<string, Uint8Array>([['1.0.0', v1]]);
    const sims = await startSimulated(server, creds, { firmware: '1.0.0', images });
    try {
      await expect.poll(async () => (await deployment(a, id)).status, poll).toBe('completed');
      expect(sims.map((d) => d.firmware)).toEqual(['1.1.0', '1.1.0']);
      // The module built 1.1.0 from its own 1.0.0 and the delta: byte for byte the uploaded image.
      expect(Buffer.compare(Buffer.from(images.get('1.1.0')!), v2)).toBe(0);
      const updates = await updatesOf(id);
      expect(updates.map((u: { delta_id: string }) => u.delta_id)).toEqual([delta.id, delta.id]);
      // The deployment's bytes: the delta's size for each device, against the full image's.
      const view = await deployment(a, id);
      expect(view.transfer).toEqual({
        bytes_sent: 2 * Number(delta.size),
        full_image_bytes: 2 * v2.length,
        delta_updates: 2,
      });
    } finally {
      await Promise.all(sims.map((d) => d.stop()));
    }
    // A second deployment of the same pair reuses the cached delta: still one row, not rebuilt.
    await devicesOn100(a, 'DB', 1);
    await deploy(a, serials('DB', 1));
    await server.service.services.deltas.idle();
    const rows = await knex()('firmware_deltas');
    expect(rows).toHaveLength(1);
    expect(rows[0].built_at).toEqual(delta.built_at);
  });

  it('a module that cannot apply the delta gets the full image once and installs it', async () => {
    const creds = await devicesOn100(a, 'DF', 1);
    const id = await deploy(a, serials('DF', 1));
    await readyDelta();
    const images = new Map<string, Uint8Array>([['1.0.0', v1]]);
    const sims = await startSimulated(server, creds, { firmware: '1.0.0', images, failDeltaApply: true });
    try {
      await expect.poll(async () => (await deployment(a, id)).status, poll).toBe('completed');
      expect(sims[0]!.firmware).toBe('1.1.0');
      const [u] = await updatesOf(id);
      expect(u).toMatchObject({ state: 'succeeded', delta_refused: true });
      const view = await deployment(a, id);
      expect(view.counts).toMatchObject({ succeeded: 1, failed: 0 });
      // Both files went to the device: the delta it could not apply, then the image.
      const [delta] = await knex()('firmware_deltas');
      expect(view.transfer).toEqual({
        bytes_sent: v2.length + Number(delta.size),
        full_image_bytes: v2.length,
        delta_updates: 0,
      });
    } finally {
      await Promise.all(sims.map((d) => d.stop()));
    }
  });

  it('a delta link opens only the delta its own job was offered (signed per job, device and delta)', async () => {
    const { downloadLinks } = server.service.services;
    const [ua] = await knex()('device_updates').whereNotNull('delta_id').where({ delta_refused: false }).limit(1);
    // Another account's job, in flight, with no delta offered.
    await devicesOn100(b, 'DT', 1);
    const idB = await deploy(b, serials('DT', 1));
    const [ub] = await updatesOf(idB);
    await knex()('device_updates').whereIn('id', [ua.id, ub.id]).update({ state: 'sent' });
    const base = server.service.httpUrl;
    const e = Math.floor(Date.now() / 1000) + 600;
    const good = downloadLinks.deltaUrl(base, {
      jobId: ua.id,
      deviceId: ua.device_id,
      deltaId: ua.delta_id,
      expiresAt: e,
    });
    const ok = await fetch(good);
    expect(ok.status).toBe(200);
    const bytes = Buffer.from(await ok.arrayBuffer());
    expect(bytes.subarray(0, 8).toString()).toBe('BSDIFF40');
    // Account B's job with A's delta id, correctly signed as if the key leaked: still refused.
    const foreign = downloadLinks.deltaUrl(base, {
      jobId: ub.id,
      deviceId: ub.device_id,
      deltaId: ua.delta_id,
      expiresAt: e,
    });
    expect((await fetch(foreign)).status).toBe(403);
    // A's signature on B's job id; a full-image link's signature on the delta path.
    expect((await fetch(good.replace(ua.id, ub.id))).status).toBe(403);
    const image = downloadLinks.url(base, {
      jobId: ua.id,
      deviceId: ua.device_id,
      firmwareVersionId: ua.firmware_version_id,
      expiresAt: e,
    });
    expect((await fetch(image.replace('?', '/delta?'))).status).toBe(403);
  });

  it('builds each pair once across processes, and never above the image size cap', async () => {
    const [pair] = await knex()('firmware_versions').where({ account_id: a.accountId }).orderBy('version_key');
    const deps = {
      knex: knex(),
      clock: { now: () => new Date() },
      logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
    } as unknown as ServiceDeps;
    let builds = 0;
    const build = async (_job: DeltaJob): Promise<BuiltDelta> => {
      builds += 1;
      await new Promise((r) => setTimeout(r, 100));
      return { patch: new Uint8Array([1, 2, 3]), sha256: 'x', buildMs: 1 };
    };
    const storage = server.service.services.firmwareStorage;
    const p = {
      fromSha256: 'a'.repeat(64),
      fromKey: pair.storage_key,
      fromSize: 10,
      toSha256: 'b'.repeat(64),
      toKey: pair.storage_key,
      toSize: 10,
    };
    const one = new DeltaCache(deps, { storage, options: { build } });
    const two = new DeltaCache(deps, { storage, options: { build } });
    one.ensure(p);
    two.ensure(p);
    await Promise.all([one.idle(), two.idle()]);
    expect(builds).toBe(1);
    expect(await knex()('firmware_deltas').where({ from_sha256: p.fromSha256 }).select('status')).toEqual([
      { status: 'ready' },
    ]);
    const capped = new DeltaCache(deps, { storage, options: { build, maxImageBytes: 9 } });
    capped.ensure({ ...p, toSha256: 'c'.repeat(64) });
    await capped.idle();
    expect(builds).toBe(1);
    expect(
      await knex()('firmware_deltas')
        .where({ to_sha256: 'c'.repeat(64) })
        .select('status'),
    ).toEqual([{ status: 'too_large' }]);
  });
});
