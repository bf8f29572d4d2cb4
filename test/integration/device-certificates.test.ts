import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { X509Certificate, createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel, claimDevices } from '../helpers/factories';
import { connectDevice } from '../helpers/mqtt';
import { randomBytes } from 'node:crypto';
import { ManualClock } from '#core/shared/clock';
import { DeviceCa } from '#core/certificates/device-ca';
import { ServerSecret, loadServerSecret } from '#core/shared/server-secret';
import { DomainError } from '#core/shared/errors';
import { loadConfig } from '#core/config';
import { x509 } from '#core/certificates/x509';
import { recordGateway } from '../helpers/stand-ins';
import {
  makeCsr,
  tamperCsr,
  peerCertificate,
  foreignCertificate,
  opensslAvailable,
  opensslCsr,
  opensslVerifyClient,
  writeCaFiles,
  type TestKeyType,
} from '../helpers/certificates';
import { ifStarted } from '../helpers/teardown';

const sha256 = (der: Buffer) => createHash('sha256').update(der).digest('hex');

describe('device certificates: device CA, CSR signing, listing, revocation, certificate authentication', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;
  let viewer: TestAccount['api'];
  // The service's clock, so a certificate can be made to expire without waiting ten years.
  const clock = new ManualClock(new Date());

  beforeAll(async () => {
    server = await startTestServer({ clock });
    a = await server.createAccount();
    b = await server.createAccount();
    await buildModel(a, 'LX-200');
    await buildModel(b, 'LX-200');
    await claimDevices(a, { serials: ['CERT-1', 'CERT-2', 'CERT-3', 'CERT-4', 'CERT-5'], model: 'LX-200' });
    const key = await a.api.post('/api/v1/api-keys', { name: 'dashboard', role: 'viewer' });
    viewer = a.api.withKey(key.body.secret);
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  const auth = () => server.service.services.deviceAuth;
  const caPem = async () => (await a.api.get('/api/v1/device-ca')).body as string;

  it('serves one device CA, created once and kept in the database with its key sealed', async () => {
    const res = await a.api.get('/api/v1/device-ca');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/x-pem-file');
    const ca = new X509Certificate(res.body as string);
    expect(ca.ca).toBe(true);
    expect(ca.checkIssued(ca)).toBe(true);
    expect(ca.publicKey.asymmetricKeyType).toBe('ec');
    expect(new Date(ca.validTo).getTime()).toBeGreaterThan(Date.now() + 25 * 365 * 86_400_000);
    expect((await b.api.get('/api/v1/device-ca')).body).toBe(res.body);
    const rows = await server.service.database.knex('device_ca').select();
    expect(rows).toHaveLength(1);
    expect(rows[0].certificate_pem.trim()).toBe((res.body as string).trim());
    expect(rows[0].private_key_sealed).toMatch(/^v1\./);
    expect(rows[0].private_key_sealed).not.toContain('PRIVATE KEY');
    // A restart reads the same CA back instead of making a new one.
    await server.restart();
    expect(await caPem()).toBe(res.body);
  });

  for (const type of ['P-256', 'Ed25519', 'P-384', 'RSA-2048'] as TestKeyType[]) {
    it(`signs a ${type} CSR: CN is the serial whatever the CSR asked, the CSR's key, client authentication only`, async () => {
      const csr = await makeCsr({ type, commonName: 'CERT-2' });
      const res = await a.api.post('/api/v1/devices/CERT-1/certificates', { csr: csr.pem });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      const body = res.body;
      const cert = new X509Certificate(body.certificate);
      const ca = new X509Certificate(await caPem());
      expect(cert.subject).toBe('CN=CERT-1');
      expect(cert.checkIssued(ca)).toBe(true);
      expect(cert.verify(ca.publicKey)).toBe(true);
      expect(cert.ca).toBe(false);
      expect(cert.publicKey.export({ type: 'spki', format: 'der' }).equals(csr.publicKeySpki)).toBe(true);
      expect(body.fingerprint_sha256).toBe(sha256(cert.raw));
      expect(body).toMatchObject({ serial: 'CERT-1', key_algorithm: type, revoked_at: null, revoked_reason: null });
      expect(body.serial_number).toMatch(/^[0-9a-f]{32}$/);
      expect(body.not_after).toBe(new Date(cert.validTo).toISOString());
      // DEVICE_CERT_DAYS default: 3650 days from now.
      expect(Math.abs(new Date(body.not_after).getTime() - (clock.now().getTime() + 3650 * 86_400_000))).toBeLessThan(
        2000,
      );
      const parsed = new x509.X509Certificate(body.certificate);
      expect(parsed.getExtension(x509.KeyUsagesExtension)?.usages).toBe(x509.KeyUsageFlags.digitalSignature);
      expect(parsed.getExtension(x509.ExtendedKeyUsageExtension)?.usages).toEqual([x509.ExtendedKeyUsage.clientAuth]);
      expect(parsed.getExtension(x509.BasicConstraintsExtension)?.ca).toBe(false);
    });
  }

  it.skipIf(!opensslAvailable())(
    'signs CSRs made with openssl, and openssl verifies the result as a TLS client certificate',
    async () => {
      const ca = await caPem();
      for (const type of ['P-256', 'Ed25519'] as const) {
        const csr = opensslCsr({ type, subject: '/CN=not-my-serial/O=Acme' });
        const res = await a.api.post('/api/v1/devices/CERT-2/certificates', { csr: csr.pem });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        expect(new X509Certificate(res.body.certificate).subject).toBe('CN=CERT-2');
        const verified = opensslVerifyClient({ caPem: ca, certificatePem: res.body.certificate });
        expect(verified.output).toContain('OK');
        expect(verified.ok).toBe(true);
      }
    },
  );

  it('refuses unreadable, tampered and unsupported CSRs with 422 csr_invalid and records nothing', async () => {
    const before = await a.api.get('/api/v1/devices/CERT-3/certificates');
    expect(before.body.certificates).toEqual([]);
    const good = await makeCsr();
    const cases: Array<[string, unknown]> = [
      ['not a PEM', 'hello'],
      ['garbage inside PEM armour', '-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n'],
      ['a signature that does not verify', tamperCsr(good.pem)],
      ['a certificate instead of a CSR', await foreignCertificate('CERT-3')],
    ];
    for (const [what, csr] of cases) {
      const res = await a.api.post('/api/v1/devices/CERT-3/certificates', { csr });
      expect(res.status, what).toBe(422);
      expect(res.body.code, what).toBe('csr_invalid');
      expect(res.body.errors[0].field, what).toBe('csr');
    }
    // Shape errors are ordinary validation errors.
    for (const body of [{}, { csr: '' }, { csr: 'x'.repeat(10_001) }, { csr: good.pem, extra: 1 }]) {
      const res = await a.api.post('/api/v1/devices/CERT-3/certificates', body);
      expect(res.status).toBe(422);
      expect(res.body.code).toBe('validation_failed');
    }
    expect((await a.api.get('/api/v1/devices/CERT-3/certificates')).body.certificates).toEqual([]);
  });

  it('is for admins of the device account: viewers 403, other accounts and unknown serials the same 404', async () => {
    const csr = (await makeCsr()).pem;
    expect((await viewer.post('/api/v1/devices/CERT-3/certificates', { csr })).status).toBe(403);
    const foreign = await b.api.post('/api/v1/devices/CERT-3/certificates', { csr });
    const missing = await b.api.post('/api/v1/devices/NO-SUCH-1/certificates', { csr });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual(missing.body);
    expect((await b.api.get('/api/v1/devices/CERT-3/certificates')).status).toBe(404);
    // Viewers may list.
    expect((await viewer.get('/api/v1/devices/CERT-3/certificates')).status).toBe(200);
  });

  it('lists certificates newest first and records their issue in the history', async () => {
    const first = await a.api.post('/api/v1/devices/CERT-3/certificates', { csr: (await makeCsr()).pem });
    clock.advance(1000);
    const second = await a.api.post('/api/v1/devices/CERT-3/certificates', {
      csr: (await makeCsr({ type: 'Ed25519' })).pem,
    });
    const list = await a.api.get('/api/v1/devices/CERT-3/certificates');
    expect(list.status).toBe(200);
    expect(list.body.certificates.map((c: { fingerprint_sha256: string }) => c.fingerprint_sha256)).toEqual([
      second.body.fingerprint_sha256,
      first.body.fingerprint_sha256,
    ]);
    expect(list.body.certificates[0]).toEqual(second.body);
    const history = await a.api.get('/api/v1/devices/CERT-3/history');
    const issued = history.body.events.filter((e: { type: string }) => e.type === 'certificate_issued');
    expect(issued.map((e: { data: { fingerprint_sha256: string } }) => e.data.fingerprint_sha256)).toEqual([
      second.body.fingerprint_sha256,
      first.body.fingerprint_sha256,
    ]);
  });

  it('authenticates a device by its certificate: client id (and username, if given) must equal the CN', async () => {
    const res = await a.api.post('/api/v1/devices/CERT-4/certificates', { csr: (await makeCsr()).pem });
    const certificate = peerCertificate(res.body.certificate);
    const ok = await auth().authenticateCertificate({ clientId: 'CERT-4', username: undefined, certificate });
    expect(ok).toMatchObject({
      ok: true,
      session: {
        serial: 'CERT-4',
        accountId: a.accountId,
        certificateFingerprint: res.body.fingerprint_sha256,
        desiredConfigVersion: 1,
      },
    });
    expect((await auth().authenticateCertificate({ clientId: 'CERT-4', username: 'CERT-4', certificate })).ok).toBe(
      true,
    );
    expect(await auth().authenticateCertificate({ clientId: 'CERT-5', username: undefined, certificate })).toEqual({
      ok: false,
      reason: 'invalid_client',
    });
    expect(await auth().authenticateCertificate({ clientId: 'CERT-4', username: 'CERT-5', certificate })).toEqual({
      ok: false,
      reason: 'invalid_client',
    });
    expect(await auth().authenticateCertificate({ clientId: '', username: undefined, certificate })).toEqual({
      ok: false,
      reason: 'invalid_client',
    });
  });

  it('refuses certificates of another CA, unknown to the service, unreadable, or outside their validity', async () => {
    const foreign = peerCertificate(await foreignCertificate('CERT-4'));
    expect(
      await auth().authenticateCertificate({ clientId: 'CERT-4', username: undefined, certificate: foreign }),
    ).toEqual({ ok: false, reason: 'certificate_untrusted' });
    // The CA certificate itself is not a device certificate.
    const ca = peerCertificate(await caPem());
    expect(
      (await auth().authenticateCertificate({ clientId: 'CERT-4', username: undefined, certificate: ca })).ok,
    ).toBe(false);
    expect(
      await auth().authenticateCertificate({
        clientId: 'CERT-4',
        username: undefined,
        certificate: { raw: Buffer.from('junk') },
      }),
    ).toEqual({ ok: false, reason: 'certificate_invalid' });
    expect(await auth().authenticateCertificate({ clientId: 'CERT-4', username: undefined, certificate: {} })).toEqual({
      ok: false,
      reason: 'certificate_invalid',
    });
    // Signed by our CA but never recorded (its row is gone): refused.
    const res = await a.api.post('/api/v1/devices/CERT-4/certificates', { csr: (await makeCsr()).pem });
    await server.service.database
      .knex('device_certificates')
      .where({ fingerprint_sha256: res.body.fingerprint_sha256 })
      .delete();
    expect(
      await auth().authenticateCertificate({
        clientId: 'CERT-4',
        username: undefined,
        certificate: peerCertificate(res.body.certificate),
      }),
    ).toEqual({ ok: false, reason: 'certificate_unknown' });
  });

  it('revokes a certificate: refused from then on, the sessions that used it are closed, revoking again changes nothing', async () => {
    const issued = await a.api.post('/api/v1/devices/CERT-5/certificates', { csr: (await makeCsr()).pem });
    const kept = await a.api.post('/api/v1/devices/CERT-5/certificates', { csr: (await makeCsr()).pem });
    const certificate = peerCertificate(issued.body.certificate);
    expect((await auth().authenticateCertificate({ clientId: 'CERT-5', username: undefined, certificate })).ok).toBe(
      true,
    );
    const gateway = recordGateway(server.service.services.gateway, { passThrough: true });
    try {
      expect(
        (await viewer.delete(`/api/v1/devices/CERT-5/certificates/${issued.body.fingerprint_sha256}`)).status,
      ).toBe(403);
      expect((await b.api.delete(`/api/v1/devices/CERT-5/certificates/${issued.body.fingerprint_sha256}`)).status).toBe(
        404,
      );
      expect(gateway.disconnects).toEqual([]);
      // The colon-separated upper-case form openssl and node:tls print works as well.
      const colons = issued.body.fingerprint_sha256.toUpperCase().match(/../g).join(':');
      const res = await a.api.delete(`/api/v1/devices/CERT-5/certificates/${encodeURIComponent(colons)}`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ fingerprint_sha256: issued.body.fingerprint_sha256, revoked_reason: 'revoked' });
      expect(res.body.revoked_at).toBe(clock.now().toISOString());
      expect(gateway.disconnects).toEqual([
        { serial: 'CERT-5', reason: 'certificate revoked', certificateFingerprint: issued.body.fingerprint_sha256 },
      ]);
      expect(await auth().authenticateCertificate({ clientId: 'CERT-5', username: undefined, certificate })).toEqual({
        ok: false,
        reason: 'certificate_revoked',
      });
      // The device's other certificate is unaffected.
      expect(
        (
          await auth().authenticateCertificate({
            clientId: 'CERT-5',
            username: undefined,
            certificate: peerCertificate(kept.body.certificate),
          })
        ).ok,
      ).toBe(true);
      clock.advance(5000);
      const again = await a.api.delete(`/api/v1/devices/CERT-5/certificates/${issued.body.fingerprint_sha256}`);
      expect(again.status).toBe(200);
      expect(again.body.revoked_at).toBe(res.body.revoked_at);
      const list = (await a.api.get('/api/v1/devices/CERT-5/certificates')).body.certificates as Array<{
        fingerprint_sha256: string;
        revoked_at: string | null;
      }>;
      expect(list.find((c) => c.fingerprint_sha256 === issued.body.fingerprint_sha256)?.revoked_at).toBe(
        res.body.revoked_at,
      );
      expect(list.find((c) => c.fingerprint_sha256 === kept.body.fingerprint_sha256)?.revoked_at).toBeNull();
      for (const unknown of ['0'.repeat(64), 'not-a-fingerprint']) {
        const missing = await a.api.delete(`/api/v1/devices/CERT-5/certificates/${unknown}`);
        expect(missing.status).toBe(404);
        expect(missing.body.code).toBe('not_found');
      }
      const history = (await a.api.get('/api/v1/devices/CERT-5/history')).body.events as Array<{ type: string }>;
      expect(history.filter((e) => e.type === 'certificate_revoked')).toHaveLength(1);
    } finally {
      gateway.restore();
    }
  });

  it('unclaiming revokes the certificates; the serial claimed again by another account does not inherit them', async () => {
    await claimDevices(a, { serials: ['CERT-U1'], model: 'LX-200' });
    const issued = await a.api.post('/api/v1/devices/CERT-U1/certificates', { csr: (await makeCsr()).pem });
    const certificate = peerCertificate(issued.body.certificate);
    expect((await auth().authenticateCertificate({ clientId: 'CERT-U1', username: undefined, certificate })).ok).toBe(
      true,
    );
    expect((await a.api.delete('/api/v1/devices/CERT-U1')).status).toBe(204);
    expect(await auth().authenticateCertificate({ clientId: 'CERT-U1', username: undefined, certificate })).toEqual({
      ok: false,
      reason: 'certificate_revoked',
    });
    const row = await server.service.database
      .knex('device_certificates')
      .where({ fingerprint_sha256: issued.body.fingerprint_sha256 })
      .first();
    expect(row.revoked_reason).toBe('unclaimed');
    await claimDevices(b, { serials: ['CERT-U1'], model: 'LX-200' });
    expect(await auth().authenticateCertificate({ clientId: 'CERT-U1', username: undefined, certificate })).toEqual({
      ok: false,
      reason: 'certificate_revoked',
    });
    expect((await b.api.get('/api/v1/devices/CERT-U1/certificates')).body.certificates).toEqual([]);
  });

  it('keeps passwords working alongside certificates', async () => {
    const claimed = await claimDevices(a, { serials: ['CERT-P1'], model: 'LX-200' });
    expect((await a.api.post('/api/v1/devices/CERT-P1/certificates', { csr: (await makeCsr()).pem })).status).toBe(201);
    const client = await connectDevice(server.service.mqttUrl!, {
      serial: 'CERT-P1',
      username: 'CERT-P1',
      password: claimed.devices[0].credentials.password,
    });
    await client.endAsync();
  });

  it('refuses a certificate before its validity and after it, by the service clock', async () => {
    const issued = await a.api.post('/api/v1/devices/CERT-4/certificates', { csr: (await makeCsr()).pem });
    const certificate = peerCertificate(issued.body.certificate);
    expect((await auth().authenticateCertificate({ clientId: 'CERT-4', username: undefined, certificate })).ok).toBe(
      true,
    );
    const start = clock.now();
    clock.set(new Date(new Date(issued.body.not_before).getTime() - 1000));
    expect(await auth().authenticateCertificate({ clientId: 'CERT-4', username: undefined, certificate })).toEqual({
      ok: false,
      reason: 'certificate_expired',
    });
    clock.set(new Date(new Date(issued.body.not_after).getTime() + 1000));
    expect(await auth().authenticateCertificate({ clientId: 'CERT-4', username: undefined, certificate })).toEqual({
      ok: false,
      reason: 'certificate_expired',
    });
    clock.set(start);
  });
});

describe('device CA from DEVICE_CA_CERT_FILE and DEVICE_CA_KEY_FILE', () => {
  let server: TestServer;
  let dir: string;
  let files: { certFile: string; keyFile: string; certPem: string };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'fleet-ca-'));
    files = await writeCaFiles(dir);
    server = await startTestServer({
      env: { DEVICE_CA_CERT_FILE: files.certFile, DEVICE_CA_KEY_FILE: files.keyFile, DEVICE_CERT_DAYS: '30' },
    });
  }, 180_000);
  afterAll(async () => {
    await ifStarted(server)?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("signs with the manufacturer's CA and creates none of its own", async () => {
    const a = await server.createAccount();
    await buildModel(a, 'LX-200');
    await claimDevices(a, { serials: ['MFR-1'], model: 'LX-200' });
    expect(
      new X509Certificate((await a.api.get('/api/v1/device-ca')).body).raw.equals(
        new X509Certificate(files.certPem).raw,
      ),
    ).toBe(true);
    const res = await a.api.post('/api/v1/devices/MFR-1/certificates', { csr: (await makeCsr()).pem });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const cert = new X509Certificate(res.body.certificate);
    const ca = new X509Certificate(files.certPem);
    expect(cert.checkIssued(ca) && cert.verify(ca.publicKey)).toBe(true);
    expect(cert.issuer).toBe(ca.subject);
    // DEVICE_CERT_DAYS=30
    expect(Math.abs(new Date(res.body.not_after).getTime() - (Date.now() + 30 * 86_400_000))).toBeLessThan(60_000);
    expect((await server.service.database.knex('device_ca').select()).length).toBe(0);
    expect(
      (
        await server.service.services.deviceAuth.authenticateCertificate({
          clientId: 'MFR-1',
          username: undefined,
          certificate: peerCertificate(res.body.certificate),
        })
      ).ok,
    ).toBe(true);
    if (opensslAvailable())
      expect(opensslVerifyClient({ caPem: files.certPem, certificatePem: res.body.certificate }).ok).toBe(true);
  });

  it('refuses to start on CA files that cannot sign: not a CA, a key of another certificate, a missing file, one setting of the two', async () => {
    const deps = { knex: server.service.database.knex, clock: server.service.clock, logger: server.service.logger };
    const other = await writeCaFiles(mkdtempSync(path.join(dir, 'other-')));
    const leaf = await writeCaFiles(mkdtempSync(path.join(dir, 'leaf-')), { ca: false });
    const cases: Array<[{ certFile: string; keyFile: string }, RegExp]> = [
      [{ certFile: leaf.certFile, keyFile: leaf.keyFile }, /not a CA certificate/],
      [{ certFile: files.certFile, keyFile: other.keyFile }, /is not the private key of the certificate/],
      [{ certFile: path.join(dir, 'missing.pem'), keyFile: files.keyFile }, /DEVICE_CA_CERT_FILE .* cannot be read/],
      [
        { certFile: files.certFile, keyFile: files.certFile },
        /DEVICE_CA_KEY_FILE .* is not an unencrypted PEM private key/,
      ],
    ];
    for (const [caFiles, message] of cases)
      await expect(new DeviceCa(deps, { files: caFiles }).load()).rejects.toThrow(message);
    expect(() => loadConfig({ DEVICE_CA_CERT_FILE: files.certFile })).toThrow(
      /DEVICE_CA_CERT_FILE and DEVICE_CA_KEY_FILE go together/,
    );
  });

  it('creates the database CA once when processes race for it, and keeps verifying when its key cannot be unsealed', async () => {
    const deps = { knex: server.service.database.knex, clock: server.service.clock, logger: server.service.logger };
    const serverSecret = loadServerSecret({ dataDir: server.config.dataDir });
    const racers = Array.from({ length: 4 }, () => new DeviceCa(deps, { serverSecret }));
    const loaded = await Promise.all(racers.map((ca) => ca.load()));
    expect(new Set(loaded.map((ca) => ca.pem)).size).toBe(1);
    expect(await server.service.database.knex('device_ca').select('id')).toHaveLength(1);
    for (const ca of racers) await expect(ca.signer()).resolves.toMatchObject({ algorithm: { label: 'P-256' } });
    // Another FLEET_SECRET: the certificate still reads (devices keep connecting), issuing is 503.
    const stranger = new DeviceCa(deps, { serverSecret: new ServerSecret(randomBytes(32)) });
    expect((await stranger.load()).pem).toBe(loaded[0]!.pem);
    const refused = await stranger.signer().catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(DomainError);
    expect((refused as DomainError).code).toBe('service_unavailable');
  });
});
