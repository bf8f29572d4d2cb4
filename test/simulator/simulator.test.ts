import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildFirmwareVersion, buildModel } from '../helpers/factories';
import { Fleet, claimDevices, loadCredentials, saveCredentials, makeSerials } from '#simulator/fleet';
import type { OtaDeviceListener, OtaProgressReport } from '#core/devices/device-gateway';
import { listenInsteadOfOtaEngine } from '../helpers/stand-ins';
import { ifStarted } from '../helpers/teardown';
import { scaledReconnectPolicy } from '#simulator/reconnect-backoff';

/** The simulator engine against a real server: claim flow, configuration, OTA for real. */
describe('simulator engine', () => {
  let server: TestServer;
  let account: TestAccount;
  let files: http.Server;
  let filesUrl: string;
  const image = randomBytes(64 * 1024);
  const sha256 = createHash('sha256').update(image).digest('hex');
  const progress: Array<{ serial: string; report: OtaProgressReport }> = [];
  const ready = new Set<string>();
  const fleets: Fleet[] = [];
  const rangeHeaders: Array<string | undefined> = [];
  /** Stands in for the OTA engine: notes the devices that are ready and what they report. */
  const recorder: OtaDeviceListener = {
    onDeviceReady: ({ serial }) => {
      ready.add(serial);
      return Promise.resolve();
    },
    onDeviceHeard: () => Promise.resolve(),
    onProgress: ({ serial, report }) => {
      progress.push({ serial, report });
      return Promise.resolve();
    },
    onFirmwareReported: () => Promise.resolve(),
  };

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    await buildModel(account, 'Luma-100');
    await buildFirmwareVersion(server, { accountId: account.accountId, model: 'Luma-100', version: '1.0.0' });
    listenInsteadOfOtaEngine(server.service.services.ota, recorder);
    // A stand-in for the firmware download endpoint (the OTA engine's, in production).
    files = http.createServer((req, res) => {
      if (req.url === '/fw.bin') res.writeHead(200, { 'content-length': image.length }).end(image);
      else if (req.url === '/flaky.bin') {
        rangeHeaders.push(req.headers.range);
        const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
        if (range && req.headers['if-range'] === '"fw"') {
          const start = Number(range[1]);
          res
            .writeHead(206, {
              'content-length': image.length - start,
              'content-range': `bytes ${start}-${image.length - 1}/${image.length}`,
              etag: '"fw"',
            })
            .end(image.subarray(start));
        } else {
          // The first transfer breaks halfway, as when the serving process dies.
          res.writeHead(200, { 'content-length': image.length, etag: '"fw"' });
          res.write(image.subarray(0, image.length / 2), () => res.destroy());
        }
      } else if (req.url === '/slow-404.bin') setTimeout(() => res.writeHead(404).end(), 400);
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => files.listen(0, '127.0.0.1', resolve));
    filesUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
    // Generous: the embedded database starts slowly on a busy machine.
  }, 180_000);
  afterAll(async () => {
    for (const f of fleets) await f.stop();
    ifStarted(files)?.close();
    await ifStarted(server)?.close();
  });

  const newFleet = async (
    prefix: string,
    count: number,
    extra: Partial<ConstructorParameters<typeof Fleet>[0]> = {},
  ) => {
    const devices = await claimDevices({
      apiUrl: server.service.httpUrl,
      apiKey: account.apiKey,
      model: 'Luma-100',
      firmware: '1.0.0',
      serials: makeSerials(prefix, count),
    });
    const fleet = new Fleet({
      devices,
      brokerUrl: server.service.mqttUrl!,
      firmware: '1.0.0',
      heartbeatS: 0.5,
      rebootMs: 100,
      reconnect: scaledReconnectPolicy(0.25),
      ...extra,
    });
    fleets.push(fleet);
    return fleet;
  };
  const device = async (serial: string) => (await account.api.get(`/api/v1/devices/${serial}`)).body;

  it('claims through REST, saves and reloads credentials, connects and shows the devices online', async () => {
    const creds = await claimDevices({
      apiUrl: server.service.httpUrl,
      apiKey: account.apiKey,
      model: 'Luma-100',
      firmware: '1.0.0',
      serials: makeSerials('CLAIM', 5),
    });
    expect(creds.map((c) => c.serial)).toEqual([
      'CLAIM-000001',
      'CLAIM-000002',
      'CLAIM-000003',
      'CLAIM-000004',
      'CLAIM-000005',
    ]);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'sim-')), 'creds.json');
    await saveCredentials(file, creds);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const loaded = await loadCredentials(file);
    expect(loaded).toEqual(creds);
    const fleet = new Fleet({
      devices: loaded,
      brokerUrl: `ws://127.0.0.1:${server.service.httpPort}/mqtt`,
      firmware: '1.0.0',
      heartbeatS: 0.5,
    });
    fleets.push(fleet);
    const ramp = await fleet.start();
    expect(ramp).toMatchObject({ connected: 5, failed: 0 });
    await expect
      .poll(
        async () =>
          (await account.api.get('/api/v1/devices?status=online')).body.devices.filter((d: { serial: string }) =>
            d.serial.startsWith('CLAIM-'),
          ).length,
        { timeout: 5000 },
      )
      .toBe(5);
    // Online comes with the connection; the firmware with the first heartbeat, which may land in the next flush.
    await expect
      .poll(async () => device('CLAIM-000001'), { timeout: 5000 })
      .toMatchObject({ firmware: '1.0.0', status: 'online' });
    await fleet.stop();
    await expect.poll(async () => (await device('CLAIM-000001')).status).toBe('offline');
  });

  it('a second claim of the same serials fails with a readable error', async () => {
    await expect(
      claimDevices({
        apiUrl: server.service.httpUrl,
        apiKey: account.apiKey,
        model: 'Luma-100',
        firmware: '1.0.0',
        serials: makeSerials('CLAIM', 2),
      }),
    ).rejects.toThrow(/claim of serials CLAIM-000001\.\.CLAIM-000002 failed: HTTP 4\d\d/);
  });

  it('applies a configuration and reports it', async () => {
    const fleet = await newFleet('CONF', 1);
    await fleet.start();
    const res = await account.api.patch('/api/v1/devices/CONF-000001', { config: { dim_level: 25 } });
    await expect.poll(async () => (await device('CONF-000001')).config.in_sync, { timeout: 5000 }).toBe(true);
    expect(fleet.devices[0]!.config).toMatchObject({ dim_level: 25 });
    expect(fleet.devices[0]!.appliedConfigVersion).toBe(res.body.config.desired_version);
  });

  it('applies any configuration version other than the one it applied last, a lower one too', async () => {
    const fleet = await newFleet('CONFDOWN', 1);
    await fleet.start();
    await account.api.patch('/api/v1/devices/CONFDOWN-000001', { config: { dim_level: 30 } });
    await expect.poll(async () => (await device('CONFDOWN-000001')).config.in_sync, { timeout: 5000 }).toBe(true);
    const applied = fleet.devices[0]!.appliedConfigVersion;
    expect(applied).toBeGreaterThan(1);
    // A configuration numbered lower than the one applied (as a module meets after its serial
    // moved to a service that numbers from 1): the message is the whole configuration, applied.
    await server.service.database
      .knex('devices')
      .where({ serial: 'CONFDOWN-000001' })
      .update({
        desired_config_version: 1,
        desired_config: JSON.stringify({ dim_level: 77, heartbeat_interval_s: 60 }),
      });
    fleet.devices[0]!.dropConnection();
    await expect.poll(() => fleet.devices[0]!.appliedConfigVersion, { timeout: 15_000 }).toBe(1);
    expect(fleet.devices[0]!.config).toEqual({ dim_level: 77, heartbeat_interval_s: 60 });
    await expect.poll(async () => (await device('CONFDOWN-000001')).config.in_sync, { timeout: 5000 }).toBe(true);
  });

  it('refuses a command for another model before downloading anything, with error_code wrong_model', async () => {
    const fleet = await newFleet('MODEL', 1, { model: 'Luma-100' });
    await fleet.start();
    await expect.poll(() => ready.has('MODEL-000001')).toBe(true);
    const jobId = '7b7e2a52-8f0c-4c57-9d0e-4e7f1f0b9a07';
    await server.service.services.gateway.publishOta('MODEL-000001', {
      jobId,
      version: '1.1.0',
      model: 'Luma-200',
      url: `${filesUrl}/fw.bin`,
      sha256,
      size: image.length,
    });
    await expect
      .poll(() => progress.find((p) => p.serial === 'MODEL-000001' && p.report.state === 'failed')?.report)
      .toMatchObject({ jobId, errorCode: 'wrong_model', error: expect.stringMatching(/Luma-200.*Luma-100/) });
    expect(progress.filter((p) => p.serial === 'MODEL-000001').map((p) => p.report.state)).toEqual(['failed']);
    expect(fleet.devices[0]!.firmware).toBe('1.0.0');
    // Its own model's image it installs.
    await server.service.services.gateway.publishOta('MODEL-000001', {
      jobId: '7b7e2a52-8f0c-4c57-9d0e-4e7f1f0b9a08',
      version: '1.1.0',
      model: 'Luma-100',
      url: `${filesUrl}/fw.bin`,
      sha256,
      size: image.length,
    });
    await expect.poll(() => fleet.devices[0]!.outcomes.succeeded, { timeout: 10_000 }).toBe(1);
  });

  it('performs an OTA command for real: download, sha256, install, reboot, back on the new version; a redelivered job is not applied twice', async () => {
    const fleet = await newFleet('OTA', 1);
    await fleet.start();
    await expect.poll(() => ready.has('OTA-000001')).toBe(true);
    const jobId = '0b7e2a52-8f0c-4c57-9d0e-4e7f1f0b9a01';
    const command = {
      jobId,
      version: '1.1.0',
      model: 'Luma-100',
      url: `${filesUrl}/fw.bin`,
      sha256,
      size: image.length,
    };
    await server.service.services.gateway.publishOta('OTA-000001', command);
    await expect.poll(() => fleet.devices[0]!.outcomes.succeeded, { timeout: 10_000 }).toBe(1);
    const states = progress.filter((p) => p.serial === 'OTA-000001').map((p) => p.report.state);
    expect(states).toContain('downloading');
    // QoS 1 messages of one connection may reach the handler out of order when they arrive in
    // one TCP read (Aedes dispatches a read's packets concurrently): check presence, not order.
    await expect
      .poll(() => progress.filter((p) => p.serial === 'OTA-000001').map((p) => p.report.state))
      .toEqual(expect.arrayContaining(['downloading', 'installing', 'rebooting', 'succeeded']));
    await expect.poll(async () => (await device('OTA-000001')).firmware, { timeout: 5000 }).toBe('1.1.0');
    // QoS 1 redelivery of the same job: repeated final word, no second install.
    expect(
      await fleet.devices[0]!.runOta({
        job_id: jobId,
        version: command.version,
        model: command.model,
        url: command.url,
        sha256,
        size: image.length,
      }),
    ).toBe('duplicate');
    expect(fleet.devices[0]!.outcomes.succeeded).toBe(1);
    // The same job from the service again (a re-send): deduplicated by job id, the final word repeated.
    const received = fleet.devices[0]!.commandsReceived;
    const succeededReports = () =>
      progress.filter((p) => p.serial === 'OTA-000001' && p.report.state === 'succeeded').length;
    const before = succeededReports();
    await server.service.services.gateway.publishOta('OTA-000001', command);
    await expect.poll(() => fleet.devices[0]!.commandsReceived).toBe(received + 1);
    await expect.poll(succeededReports).toBe(before + 1);
    expect(fleet.devices[0]!.outcomes.succeeded).toBe(1);
    expect(fleet.devices[0]!.firmware).toBe('1.1.0');
  });

  it('holds downloads while asked: the command is taken, nothing is fetched or reported until the release', async () => {
    const fleet = await newFleet('HOLD', 1);
    await fleet.start();
    await expect.poll(() => ready.has('HOLD-000001')).toBe(true);
    fleet.holdDownloads();
    await server.service.services.gateway.publishOta('HOLD-000001', {
      jobId: '4b7e2a52-8f0c-4c57-9d0e-4e7f1f0b9a05',
      version: '1.1.0',
      model: 'Luma-100',
      url: `${filesUrl}/fw.bin`,
      sha256,
      size: image.length,
    });
    await expect.poll(() => fleet.stats().commandsReceived).toBe(1);
    await new Promise((r) => setTimeout(r, 500));
    expect(progress.filter((p) => p.serial === 'HOLD-000001')).toEqual([]);
    expect(fleet.devices[0]!.firmware).toBe('1.0.0');
    fleet.releaseDownloads();
    await expect.poll(() => fleet.devices[0]!.outcomes.succeeded, { timeout: 10_000 }).toBe(1);
    expect(fleet.devices[0]!.firmware).toBe('1.1.0');
  });

  it('resumes a broken download with Range instead of failing the update', async () => {
    const fleet = await newFleet('RESUME', 1);
    await fleet.start();
    await expect.poll(() => ready.has('RESUME-000001')).toBe(true);
    await server.service.services.gateway.publishOta('RESUME-000001', {
      jobId: '2b7e2a52-8f0c-4c57-9d0e-4e7f1f0b9a03',
      version: '1.2.0',
      model: 'Luma-100',
      url: `${filesUrl}/flaky.bin`,
      sha256,
      size: image.length,
    });
    await expect.poll(() => fleet.devices[0]!.outcomes.succeeded, { timeout: 15_000 }).toBe(1);
    expect(rangeHeaders).toEqual([undefined, `bytes=${image.length / 2}-`]);
    expect(fleet.devices[0]!.outcomes.failed).toBe(0);
    expect(fleet.devices[0]!.firmware).toBe('1.2.0');
  });

  it('reports an outcome reached while disconnected once it is connected again', async () => {
    // Back no sooner than 2 s after the drop: the outcome (a 404 within 0.4 s) comes while it is away.
    const fleet = await newFleet('LOST', 1, {
      reconnect: { ...scaledReconnectPolicy(0.25), afterLossS: { min: 2, max: 3 } },
    });
    await fleet.start();
    await expect.poll(() => ready.has('LOST-000001')).toBe(true);
    const jobId = '3b7e2a52-8f0c-4c57-9d0e-4e7f1f0b9a04';
    await server.service.services.gateway.publishOta('LOST-000001', {
      jobId: jobId,
      version: '1.2.0',
      model: 'Luma-100',
      url: `${filesUrl}/slow-404.bin`,
      sha256,
      size: image.length,
    });
    await expect.poll(() => fleet.devices[0]!.updating).toBe(true);
    // The connection drops while the download is under way; the link then answers 404 (final).
    fleet.devices[0]!.dropConnection();
    await expect.poll(() => fleet.devices[0]!.outcomes.failed, { timeout: 5000 }).toBe(1);
    expect(fleet.devices[0]!.connected).toBe(false);
    await expect
      .poll(() => progress.find((p) => p.serial === 'LOST-000001' && p.report.state === 'failed')?.report, {
        timeout: 15_000,
      })
      .toMatchObject({ jobId, error: 'download failed: HTTP 404' });
  });

  it('sends a report again on its next connection when the service closed the last one without acknowledging it', async () => {
    const fleet = await newFleet('UNACKED', 1);
    await fleet.start();
    await expect.poll(() => ready.has('UNACKED-000001')).toBe(true);
    const jobId = '5b7e2a52-8f0c-4c57-9d0e-4e7f1f0b9a06';
    let refused = 0;
    listenInsteadOfOtaEngine(server.service.services.ota, {
      ...recorder,
      onProgress: (input) => {
        // The first `failed` cannot be stored (database away): the broker closes the connection.
        if (input.report.state === 'failed' && refused === 0) {
          refused += 1;
          return Promise.reject(new Error('database unavailable'));
        }
        return recorder.onProgress(input);
      },
    });
    try {
      await server.service.services.gateway.publishOta('UNACKED-000001', {
        jobId: jobId,
        version: '1.2.0',
        model: 'Luma-100',
        url: `${filesUrl}/slow-404.bin`,
        sha256,
        size: image.length,
      });
      await expect.poll(() => refused, { timeout: 5000 }).toBe(1);
      await expect
        .poll(() => progress.find((p) => p.serial === 'UNACKED-000001' && p.report.state === 'failed')?.report, {
          timeout: 15_000,
        })
        .toMatchObject({ jobId, error: 'download failed: HTTP 404' });
    } finally {
      listenInsteadOfOtaEngine(server.service.services.ota, recorder);
    }
  });

  it('reports a sha256 mismatch as a failure and stays on its version', async () => {
    const fleet = await newFleet('SHA', 1);
    await fleet.start();
    await expect.poll(() => ready.has('SHA-000001')).toBe(true);
    await server.service.services.gateway.publishOta('SHA-000001', {
      jobId: '1b7e2a52-8f0c-4c57-9d0e-4e7f1f0b9a02',
      version: '1.1.0',
      model: 'Luma-100',
      url: `${filesUrl}/fw.bin`,
      sha256: 'f'.repeat(64),
      size: image.length,
    });
    await expect.poll(() => fleet.devices[0]!.outcomes.failed, { timeout: 10_000 }).toBe(1);
    // Order-insensitive: QoS 1 reports from one read may reach the handler in any order.
    await expect.poll(() => progress.some((p) => p.serial === 'SHA-000001' && p.report.state === 'failed')).toBe(true);
    const failed = progress.find((p) => p.serial === 'SHA-000001' && p.report.state === 'failed')!.report;
    expect(failed.error).toMatch(/sha256 mismatch/);
    expect(failed.errorCode).toBe('digest_mismatch');
    expect(progress.filter((p) => p.serial === 'SHA-000001').map((p) => p.report.state)).not.toContain('installing');
    expect(fleet.devices[0]!.firmware).toBe('1.0.0');
  });

  it('with a signing key, installs an image signed by it and reports signature_invalid for a forged or missing signature', async () => {
    const trusted = generateKeyPairSync('ed25519');
    const other = generateKeyPairSync('ed25519');
    const keyId = createHash('sha256')
      .update(trusted.publicKey.export({ type: 'spki', format: 'der' }))
      .digest('hex')
      .slice(0, 16);
    const digest = createHash('sha256').update(image).digest();
    const fleet = await newFleet('SIGNED', 3, { signingKey: trusted.publicKey });
    await fleet.start();
    await expect.poll(() => fleet.devices.every((d) => ready.has(d.serial))).toBe(true);
    const command = (n: number) => ({
      jobId: `6b7e2a52-8f0c-4c57-9d0e-4e7f1f0b9a0${n}`,
      version: '1.3.0',
      model: 'Luma-100',
      url: `${filesUrl}/fw.bin`,
      sha256,
      size: image.length,
    });
    const [good, forged, missing] = fleet.devices as [
      (typeof fleet.devices)[0],
      (typeof fleet.devices)[0],
      (typeof fleet.devices)[0],
    ];
    await server.service.services.gateway.publishOta(good.serial, {
      ...command(1),
      signature: { value: sign(null, digest, trusted.privateKey).toString('base64'), keyId },
    });
    // Names the trusted key but was made by another one: only the verification can tell.
    await server.service.services.gateway.publishOta(forged.serial, {
      ...command(2),
      signature: { value: sign(null, digest, other.privateKey).toString('base64'), keyId },
    });
    await server.service.services.gateway.publishOta(missing.serial, command(3));
    await expect.poll(() => good.outcomes.succeeded, { timeout: 10_000 }).toBe(1);
    expect(good.firmware).toBe('1.3.0');
    await expect.poll(() => forged.outcomes.failed + missing.outcomes.failed, { timeout: 10_000 }).toBe(2);
    const failure = (serial: string) =>
      progress.find((p) => p.serial === serial && p.report.state === 'failed')?.report.error;
    await expect
      .poll(() => failure(forged.serial))
      .toMatch(/^signature_invalid: the signature does not verify with key [0-9a-f]{16}/);
    await expect.poll(() => failure(missing.serial)).toMatch(/^signature_invalid: the command carries no signature/);
    for (const d of [forged, missing])
      expect(progress.find((p) => p.serial === d.serial && p.report.state === 'failed')?.report.errorCode).toBe(
        'signature',
      );
    for (const d of [forged, missing]) {
      expect(d.firmware).toBe('1.0.0');
      expect(progress.filter((p) => p.serial === d.serial).map((p) => p.report.state)).not.toContain('installing');
    }
  });

  it('fails at the requested rate with realistic errors, rolling back when the new image does not boot', async () => {
    const fleet = await newFleet('FAIL', 6, { failRate: 1 });
    await fleet.start();
    await expect.poll(() => fleet.devices.every((d) => ready.has(d.serial))).toBe(true);
    for (const [i, d] of fleet.devices.entries()) {
      await server.service.services.gateway.publishOta(d.serial, {
        jobId: `2b7e2a52-8f0c-4c57-9d0e-4e7f1f0b9a0${i}`,
        version: '1.1.0',
        model: 'Luma-100',
        url: `${filesUrl}/fw.bin`,
        sha256,
        size: image.length,
      });
    }
    await expect.poll(() => fleet.stats().failed + fleet.stats().rolledBack, { timeout: 15_000 }).toBe(6);
    const finalsNow = () =>
      progress.filter(
        (p) => p.serial.startsWith('FAIL-') && (p.report.state === 'failed' || p.report.state === 'rolled_back'),
      );
    await expect
      .poll(() =>
        finalsNow()
          .map((f) => f.serial)
          .sort(),
      )
      .toEqual(fleet.devices.map((d) => d.serial).sort());
    const finals = finalsNow();
    for (const f of finals) expect(f.report.error).toMatch(/\w+.*: |reverted|refused|failed/);
    // Each failure names its reason from the protocol's vocabulary.
    for (const f of finals) {
      const expected =
        f.report.state === 'rolled_back'
          ? 'boot_failed'
          : /flash write/.test(f.report.error!)
            ? 'flash_write'
            : /voltage/.test(f.report.error!)
              ? 'low_power'
              : 'download';
      expect(f.report.errorCode, f.report.error).toBe(expected);
    }
    for (const d of fleet.devices) expect(d.firmware).toBe('1.0.0');
  });
});
