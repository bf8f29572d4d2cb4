import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel, buildFirmwareVersion, claimDevices, serials } from '../helpers/factories';
import { sha256Hex } from '#core/shared/secrets';
import { X509Certificate } from 'node:crypto';
import { makeCsr, peerCertificate, tamperCsr } from '../helpers/certificates';
import { ifStarted } from '../helpers/teardown';

describe('POST /api/v1/devices/claim', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount({ quota: 5000, budget: 100_000, unitPrice: 2.5 });
    b = await server.createAccount({ quota: 5000 });
    await buildModel(a, 'LX-200');
    await buildModel(b, 'LX-200');
    await buildFirmwareVersion(server, { accountId: a.accountId, model: 'LX-200', version: '1.4.2' });
    // Embedded database start and seeding claims can be slow on a busy machine.
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  const knex = () => server.service.database.knex;
  const deviceCount = async (accountId: string) =>
    Number((await knex()('devices').where({ account_id: accountId }).count('* as c'))[0]!.c);

  it('claims a batch: devices offline and unreported, credentials shown once and stored only hashed', async () => {
    const body = await claimDevices(a, { serials: serials('BATCH', 3), model: 'LX-200', firmware: '1.4.2' });
    expect(body.claimed).toBe(3);
    expect(body.charged).toEqual({ amount: 7.5, currency: 'EUR' });
    expect(body.deployment_id === null || typeof body.deployment_id === 'string').toBe(true);
    const first = body.devices[0];
    expect(first).toMatchObject({
      serial: 'BATCH-0001',
      name: 'BATCH-0001',
      model: 'LX-200',
      firmware: null,
      status: 'offline',
      connectivity: 'offline',
      ip: null,
      last_seen: null,
    });
    expect(first.config.desired).toEqual({
      heartbeat_interval_s: 60,
      dim_level: 100,
      power_on_level: 100,
      timezone: 'UTC',
      maintenance_window: null,
    });
    expect(first.credentials.username).toBe('BATCH-0001');
    expect(first.credentials.password).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const stored = await knex()('device_credentials')
      .join('devices', 'devices.id', 'device_credentials.device_id')
      .where('devices.serial', 'BATCH-0001')
      .first('secret_hash');
    expect(stored.secret_hash).toBe(sha256Hex(first.credentials.password));
    expect(JSON.stringify(await knex()('device_credentials').select())).not.toContain(first.credentials.password);
    // The password is never shown again.
    const again = await a.api.get('/api/v1/devices/BATCH-0001');
    expect(JSON.stringify(again.body)).not.toContain(first.credentials.password);
    // Ledger, history and outbox rows were written.
    const ledger = await knex()('ledger_entries').where({ account_id: a.accountId });
    expect(ledger.map((l) => [l.kind, Number(l.amount_minor), l.devices])).toEqual([['claim_charge', 750, 3]]);
    const history = await a.api.get('/api/v1/devices/BATCH-0002/history');
    expect(history.body.events.find((e: { type: string }) => e.type === 'claimed')).toMatchObject({
      data: { model: 'LX-200', firmware: '1.4.2' },
    });
    // The claimed firmware is scheduled: each device shows its queued update of that deployment.
    if (body.deployment_id !== null) {
      for (const device of body.devices)
        expect(device.update).toMatchObject({
          deployment_id: body.deployment_id,
          state: 'queued',
          target_version: '1.4.2',
        });
    }
    const events = await knex()('events').where({ account_id: a.accountId, type: 'device.claimed' });
    expect(events.map((e) => e.subject).sort()).toEqual(serials('BATCH', 3));
  });

  it('claims a single device with a name, and names in the batch form', async () => {
    const single = await a.api.post('/api/v1/devices/claim', {
      serial: 'SINGLE-1',
      name: 'Lobby left',
      model: 'LX-200',
    });
    expect(single.status).toBe(201);
    expect(single.body.devices[0]).toMatchObject({ serial: 'SINGLE-1', name: 'Lobby left' });
    expect(single.body.deployment_id).toBeNull();
    const named = await claimDevices(a, {
      serials: ['NAMED-1', 'NAMED-2'],
      model: 'LX-200',
      names: { 'NAMED-2': 'Stage' },
    });
    expect(named.devices.map((d: { name: string }) => d.name)).toEqual(['NAMED-1', 'Stage']);
  });

  it('refuses unknown models, unknown firmware versions and malformed versions with nothing written', async () => {
    const before = await deviceCount(a.accountId);
    const model = await a.api.post('/api/v1/devices/claim', { serials: ['X-1'], model: 'NOPE', firmware: '1.4.2' });
    expect(model.status).toBe(422);
    expect(model.body.code).toBe('unknown_model');
    const version = await a.api.post('/api/v1/devices/claim', { serials: ['X-1'], model: 'LX-200', firmware: '9.9.9' });
    expect(version.status).toBe(422);
    expect(version.body.code).toBe('version_not_found');
    const malformed = await a.api.post('/api/v1/devices/claim', {
      serials: ['X-1'],
      model: 'LX-200',
      firmware: 'latest',
    });
    expect(malformed.status).toBe(422);
    expect(malformed.body.code).toBe('invalid_version');
    expect(await deviceCount(a.accountId)).toBe(before);
  });

  it('is all or nothing: every invalid, duplicated and already claimed serial is listed, nothing is claimed', async () => {
    const before = await deviceCount(a.accountId);
    const res = await a.api.post('/api/v1/devices/claim', {
      serials: ['OK-1', 'bad serial', 'x'.repeat(65), 'DUP-1', 'DUP-1', 'BATCH-0001', 'OK-2', 'ünï'],
      model: 'LX-200',
    });
    expect(res.status).toBe(422);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body.code).toBe('claim_rejected');
    expect(res.body.offending_serials).toEqual(
      expect.arrayContaining([
        { serial: 'bad serial', reason: 'invalid' },
        { serial: 'x'.repeat(65), reason: 'invalid' },
        { serial: 'DUP-1', reason: 'duplicate' },
        { serial: 'BATCH-0001', reason: 'already_claimed' },
        { serial: 'ünï', reason: 'invalid' },
      ]),
    );
    expect(res.body.offending_serials).toHaveLength(5);
    expect(await deviceCount(a.accountId)).toBe(before);
    expect((await a.api.get('/api/v1/devices/OK-1')).status).toBe(404);
  });

  it("tells account B only that A's serial is already claimed, never by whom", async () => {
    const res = await b.api.post('/api/v1/devices/claim', { serials: ['BATCH-0001', 'B-NEW-1'], model: 'LX-200' });
    expect(res.status).toBe(422);
    expect(res.body.offending_serials).toEqual([{ serial: 'BATCH-0001', reason: 'already_claimed' }]);
    const text = JSON.stringify(res.body);
    expect(text).not.toContain(a.accountId);
    expect(text).not.toMatch(/Account \d/);
    expect((await b.api.get('/api/v1/devices/B-NEW-1')).status).toBe(404);
  });

  it('refuses 1001 serials and an empty list with 422 before touching anything', async () => {
    const big = await a.api.post('/api/v1/devices/claim', { serials: serials('BIG', 1001), model: 'LX-200' });
    expect(big.status).toBe(422);
    expect(big.body.code).toBe('validation_failed');
    expect(JSON.stringify(big.body.errors)).toContain('1000');
    const empty = await a.api.post('/api/v1/devices/claim', { serials: [], model: 'LX-200' });
    expect(empty.status).toBe(422);
    const both = await a.api.post('/api/v1/devices/claim', { serials: ['A-1'], serial: 'A-2', model: 'LX-200' });
    expect(both.status).toBe(422);
    const unknownField = await a.api.post('/api/v1/devices/claim', {
      serials: ['A-1'],
      model: 'LX-200',
      account_id: b.accountId,
    });
    expect(unknownField.status).toBe(422);
  });

  it('claims 1000 devices in one request', { timeout: 120_000 }, async () => {
    const body = await claimDevices(a, { serials: serials('K', 1000), model: 'LX-200' });
    expect(body.claimed).toBe(1000);
    expect(body.devices).toHaveLength(1000);
    expect(new Set(body.devices.map((d: { credentials: { password: string } }) => d.credentials.password)).size).toBe(
      1000,
    );
  });

  it('refuses a viewer key with 403 and claims nothing', async () => {
    const key = await a.api.post('/api/v1/api-keys', { name: 'viewer', role: 'viewer' });
    const viewer = a.api.withKey(key.body.secret);
    const res = await viewer.post('/api/v1/devices/claim', { serials: ['VIEW-1'], model: 'LX-200' });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('forbidden');
    expect((await a.api.get('/api/v1/devices/VIEW-1')).status).toBe(404);
  });

  describe('CSRs in the batch claim (csrs: serial -> PEM)', () => {
    it('signs a certificate per CSR and answers it with its device; devices without a CSR get none', async () => {
      const [p256, ed25519] = await Promise.all([
        makeCsr({ type: 'P-256', commonName: 'line-3' }),
        makeCsr({ type: 'Ed25519' }),
      ]);
      const body = await claimDevices(a, {
        serials: ['CSR-1', 'CSR-2', 'CSR-3'],
        model: 'LX-200',
        csrs: { 'CSR-1': p256.pem, 'CSR-3': ed25519.pem },
      });
      const [first, second, third] = body.devices;
      expect(second.certificate).toBeUndefined();
      const ca = new X509Certificate((await a.api.get('/api/v1/device-ca')).body);
      for (const [device, csr] of [
        [first, p256],
        [third, ed25519],
      ] as const) {
        const cert = new X509Certificate(device.certificate.certificate);
        expect(cert.subject).toBe(`CN=${device.serial}`);
        expect(cert.checkIssued(ca) && cert.verify(ca.publicKey)).toBe(true);
        expect(cert.publicKey.export({ type: 'spki', format: 'der' }).equals(csr.publicKeySpki)).toBe(true);
        expect(device.certificate).toMatchObject({
          serial: device.serial,
          fingerprint_sha256: sha256Hex(cert.raw),
          revoked_at: null,
        });
        const listed = await a.api.get(`/api/v1/devices/${device.serial}/certificates`);
        expect(listed.body.certificates).toEqual([device.certificate]);
        const auth = await server.service.services.deviceAuth.authenticateCertificate({
          clientId: device.serial,
          username: undefined,
          certificate: peerCertificate(device.certificate.certificate),
        });
        expect(auth.ok).toBe(true);
      }
      expect(first.certificate.key_algorithm).toBe('P-256');
      expect(third.certificate.key_algorithm).toBe('Ed25519');
    });

    it('refuses the whole claim when one CSR is invalid, naming each bad one; nothing is claimed or signed', async () => {
      const before = await deviceCount(a.accountId);
      const certificatesBefore = (await knex()('device_certificates').select('fingerprint_sha256')).length;
      const good = await makeCsr();
      const res = await a.api.post('/api/v1/devices/claim', {
        serials: ['CSRX-1', 'CSRX-2', 'CSRX-3'],
        model: 'LX-200',
        csrs: { 'CSRX-1': good.pem, 'CSRX-2': tamperCsr(good.pem), 'CSRX-3': 'not a csr' },
      });
      expect(res.status).toBe(422);
      expect(res.body.code).toBe('csr_invalid');
      expect(res.body.offending_serials).toEqual(['CSRX-2', 'CSRX-3']);
      expect(res.body.errors.map((e: { field: string }) => e.field)).toEqual(['csrs.CSRX-2', 'csrs.CSRX-3']);
      expect(await deviceCount(a.accountId)).toBe(before);
      expect((await knex()('device_certificates').select('fingerprint_sha256')).length).toBe(certificatesBefore);
      // A CSR for a serial the claim does not list, or in the single form, is a validation error.
      const stray = await a.api.post('/api/v1/devices/claim', {
        serials: ['CSRX-1'],
        model: 'LX-200',
        csrs: { 'CSRX-9': good.pem },
      });
      expect(stray.status).toBe(422);
      expect(stray.body.code).toBe('validation_failed');
      const single = await a.api.post('/api/v1/devices/claim', {
        serial: 'CSRX-1',
        model: 'LX-200',
        csrs: { 'CSRX-1': good.pem },
      });
      expect(single.status).toBe(422);
      expect(await deviceCount(a.accountId)).toBe(before);
    });

    it('replays the certificates of an idempotent claim instead of signing again', async () => {
      const request = { serials: ['CSRI-1'], model: 'LX-200', csrs: { 'CSRI-1': (await makeCsr()).pem } };
      const first = await a.api.post('/api/v1/devices/claim', request, { 'Idempotency-Key': 'csr-claim-1' });
      expect(first.status).toBe(201);
      const replay = await a.api.post('/api/v1/devices/claim', request, { 'Idempotency-Key': 'csr-claim-1' });
      expect(replay.status).toBe(201);
      expect(replay.body.devices[0].certificate).toEqual(first.body.devices[0].certificate);
      expect((await a.api.get('/api/v1/devices/CSRI-1/certificates')).body.certificates).toHaveLength(1);
    });
  });

  describe('Idempotency-Key', () => {
    it('replays the original response for the same key and body, without claiming twice', async () => {
      const headers = { 'Idempotency-Key': 'claim-line-7-batch-1' };
      const input = { serials: ['IDEM-1', 'IDEM-2'], model: 'LX-200' };
      const first = await a.api.post('/api/v1/devices/claim', input, headers);
      expect(first.status).toBe(201);
      const ledgerBefore = await knex()('ledger_entries').where({ account_id: a.accountId }).count('* as c');
      const second = await a.api.post('/api/v1/devices/claim', input, headers);
      expect(second.status).toBe(201);
      expect(second.headers.get('idempotent-replayed')).toBe('true');
      expect(second.body).toEqual(first.body);
      expect(await knex()('ledger_entries').where({ account_id: a.accountId }).count('* as c')).toEqual(ledgerBefore);
    });

    it('answers 422 for the same key with a different body', async () => {
      const headers = { 'Idempotency-Key': 'claim-reuse' };
      expect(
        (await a.api.post('/api/v1/devices/claim', { serials: ['IDEM-3'], model: 'LX-200' }, headers)).status,
      ).toBe(201);
      const other = await a.api.post('/api/v1/devices/claim', { serials: ['IDEM-4'], model: 'LX-200' }, headers);
      expect(other.status).toBe(422);
      expect(other.body.code).toBe('idempotency_key_reused');
      expect((await a.api.get('/api/v1/devices/IDEM-4')).status).toBe(404);
    });

    it('scopes keys per account', async () => {
      const headers = { 'Idempotency-Key': 'shared-key' };
      const fromA = await a.api.post('/api/v1/devices/claim', { serials: ['SCOPE-A'], model: 'LX-200' }, headers);
      const fromB = await b.api.post('/api/v1/devices/claim', { serials: ['SCOPE-B'], model: 'LX-200' }, headers);
      expect(fromA.status).toBe(201);
      expect(fromB.status).toBe(201);
      expect(fromB.headers.get('idempotent-replayed')).toBeNull();
      expect(fromB.body.devices[0].serial).toBe('SCOPE-B');
    });

    it('claims once for simultaneous retries: the others get the answer or 409 with Retry-After', async () => {
      const headers = { 'Idempotency-Key': 'claim-burst' };
      const input = { serials: serials('BURST', 50), model: 'LX-200' };
      const answers = await Promise.all(
        Array.from({ length: 8 }, () => a.api.post('/api/v1/devices/claim', input, headers)),
      );
      const fresh = answers.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
      const replayed = answers.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === 'true');
      const busy = answers.filter((r) => r.status === 409);
      expect(fresh).toHaveLength(1);
      expect(replayed.length + busy.length).toBe(7);
      for (const r of replayed) expect(r.body).toEqual(fresh[0]!.body);
      for (const r of busy) {
        expect(r.body.code).toBe('idempotency_key_in_use');
        expect(r.headers.get('retry-after')).toBe('1');
      }
      const after = await a.api.post('/api/v1/devices/claim', input, headers);
      expect(after.headers.get('idempotent-replayed')).toBe('true');
      expect(await knex()('devices').whereLike('serial', 'BURST-%').count('* as c')).toEqual([{ c: 50 }]);
    });

    it('takes over an in_progress marker of the previous version once it is a minute old', async () => {
      // What a process of the previous version leaves when it dies mid-request.
      const running = { serials: ['LEGACY-1'], model: 'LX-200' };
      const crashed = { serials: ['LEGACY-2'], model: 'LX-200' };
      const marker = (key: string, body: unknown, ageMs: number) => ({
        account_id: a.accountId,
        key,
        principal: `api_key:${a.apiKeyId}`,
        operation: 'claimDevices',
        request_hash: sha256Hex(`claimDevices\n${JSON.stringify(body)}`),
        state: 'in_progress',
        created_at: new Date(Date.now() - ageMs),
      });
      await knex()('idempotency_keys').insert([
        marker('legacy-running', running, 5_000),
        marker('legacy-crashed', crashed, 120_000),
      ]);
      const whileRunning = await a.api.post('/api/v1/devices/claim', running, { 'Idempotency-Key': 'legacy-running' });
      expect(whileRunning.status).toBe(409);
      expect(whileRunning.body.code).toBe('idempotency_key_in_use');
      const afterCrash = await a.api.post('/api/v1/devices/claim', crashed, { 'Idempotency-Key': 'legacy-crashed' });
      expect(afterCrash.status).toBe(201);
      expect(afterCrash.body.devices[0].serial).toBe('LEGACY-2');
    });

    it('lets a corrected retry run after a failed attempt with the same key', async () => {
      const headers = { 'Idempotency-Key': 'fix-and-retry' };
      const failed = await a.api.post('/api/v1/devices/claim', { serials: ['bad serial'], model: 'LX-200' }, headers);
      expect(failed.status).toBe(422);
      const retried = await a.api.post('/api/v1/devices/claim', { serials: ['bad serial'], model: 'LX-200' }, headers);
      expect(retried.status).toBe(422);
      expect(retried.body.code).toBe('claim_rejected');
    });
  });
});
