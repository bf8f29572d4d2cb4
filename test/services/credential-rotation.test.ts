import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomBytes } from 'node:crypto';
import { ZodError } from 'zod';
import { ManualClock } from '#core/shared/clock';
import { ServerSecret } from '#core/shared/server-secret';
import { DomainError } from '#core/shared/errors';
import { sha256Hex } from '#core/shared/secrets';
import type { DeviceGateway } from '#core/devices/device-gateway';
import { NO_BROKER } from '#core/devices/device-gateway';
import type { CredentialsDelivery, RotationDevice } from '#core/devices/credential-rotation.service';
import { startServiceHarness, type HarnessAccount, type ServiceHarness } from '../helpers/service-harness';
import { makeCsr, peerCertificate } from '../helpers/certificates';
import { ifStarted } from '../helpers/teardown';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/**
 * Planned credential rotation (docs/device-protocol.md "Credentials rotation") over the services
 * and a database of their own: grace period, confirmation by ack or by connecting with the new
 * credential, expiry, replacement, and the emergency rotation that still revokes everything at
 * once. The wire (delivery over the session, nothing queued or logged) is in
 * test/integration/credential-rotation.test.ts.
 */
describe('credential rotation service', () => {
  let harness: ServiceHarness;
  let account: HarnessAccount;
  const clock = new ManualClock('2026-11-27T08:00:00.000Z');
  /** What the services asked the broker. */
  const offered: string[] = [];
  const disconnects: Array<{ serial: string; reason: string; certificateFingerprint?: string }> = [];
  const gateway: DeviceGateway = {
    ...NO_BROKER,
    offerCredentials: (serial) => offered.push(serial),
    disconnect: (serial, reason, match) =>
      disconnects.push({
        serial,
        reason,
        ...(match?.certificateFingerprint ? { certificateFingerprint: match.certificateFingerprint } : {}),
      }),
  };

  beforeAll(async () => {
    harness = await startServiceHarness({
      clock,
      services: { gateway, serverSecret: new ServerSecret(randomBytes(32)) },
    });
    account = await harness.createAccount();
    await harness.services.models.register(account.admin, { name: 'LX-200', description: '' });
  }, 120_000);
  afterAll(async () => ifStarted(harness)?.close());

  const claim = async (serial: string, csr?: string) => {
    const result = await harness.services.claims.claim(account.admin, {
      serials: [serial],
      model: 'LX-200',
      ...(csr ? { csrs: { [serial]: csr } } : {}),
    });
    const claimed = result.devices[0]!;
    const device: RotationDevice = { accountId: account.accountId, deviceId: claimed.device.id, serial };
    return { device, password: claimed.credentials.password, certificate: claimed.certificate };
  };
  const auth = (serial: string, password: string) =>
    harness.services.deviceAuth.authenticate({ clientId: serial, username: serial, password: Buffer.from(password) });
  const accepted = async (serial: string, password: string) => (await auth(serial, password)).ok;
  const passwordOf = (deliveries: CredentialsDelivery[]) => {
    const delivery = deliveries.find((d) => d.kind === 'password');
    if (delivery?.kind !== 'password') throw new Error('no password delivery');
    return delivery;
  };
  const refusal = async (work: Promise<unknown>): Promise<DomainError> => {
    const error = await work.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DomainError);
    return error as DomainError;
  };
  const rotationRow = (id: string) =>
    harness.database.knex('device_credential_rotations').where({ id }).first() as Promise<Record<string, unknown>>;
  const outboxEvents = (serial: string) =>
    harness.database
      .knex('events')
      .where({ type: 'device.credentials_rotated', subject: serial })
      .orderBy('seq')
      .select('data') as Promise<Array<{ data: Record<string, unknown> }>>;

  it('accepts both passwords until the device acknowledges the new one; then only the new one', async () => {
    const { device, password } = await claim('RS-ACK');
    const rotation = await harness.services.rotations.startPasswordRotation(account.admin, { serial: device.serial });
    expect(rotation).toMatchObject({ serial: 'RS-ACK', kind: 'password', state: 'pending' });
    // Default grace: 7 days.
    expect(Date.parse(rotation.graceEndsAt) - clock.now().getTime()).toBe(7 * DAY_MS);
    expect(offered).toContain('RS-ACK');
    const next = passwordOf(await harness.services.rotations.deliveries(device));
    expect(next.rotationId).toBe(rotation.id);
    expect(next.password).not.toBe(password);

    expect(await accepted(device.serial, password)).toBe(true);
    const withNew = await auth(device.serial, next.password);
    expect(withNew.ok && withNew.session.confirmsRotation).toBe(rotation.id);

    expect(await harness.services.rotations.acknowledge({ ...device, rotationId: rotation.id })).toBe('completed');
    expect(await accepted(device.serial, password)).toBe(false);
    const after = await auth(device.serial, next.password);
    expect(after.ok && after.session.confirmsRotation).toBeUndefined();
    expect(await harness.services.rotations.deliveries(device)).toEqual([]);
    // The sealed copy went with the rotation; only the hash remains, in the device's credentials.
    expect(await rotationRow(rotation.id)).toMatchObject({ outcome: 'acknowledged', secret_sealed: null });
    const credential = await harness.database.knex('device_credentials').where({ device_id: device.deviceId }).first();
    expect(credential.secret_hash).toBe(sha256Hex(next.password));
    expect((await outboxEvents(device.serial)).map((e) => e.data)).toEqual([
      expect.objectContaining({ kind: 'password', mode: 'in_band', outcome: 'acknowledged', rotation_id: rotation.id }),
    ]);
  });

  it('keeps the pending password sealed, never in clear, while it is pending', async () => {
    const { device } = await claim('RS-SEAL');
    const rotation = await harness.services.rotations.startPasswordRotation(account.admin, { serial: device.serial });
    const next = passwordOf(await harness.services.rotations.deliveries(device));
    const row = await rotationRow(rotation.id);
    expect(row.secret_hash).toBe(sha256Hex(next.password));
    expect(typeof row.secret_sealed).toBe('string');
    expect(JSON.stringify(row)).not.toContain(next.password);
  });

  it('connecting with the new password confirms the rotation', async () => {
    const { device, password } = await claim('RS-CONN');
    const rotation = await harness.services.rotations.startPasswordRotation(account.admin, { serial: device.serial });
    const next = passwordOf(await harness.services.rotations.deliveries(device));
    const result = await auth(device.serial, next.password);
    if (!result.ok) throw new Error('refused');
    await harness.services.rotations.connected({ ...device, confirmsRotation: result.session.confirmsRotation });
    expect(await accepted(device.serial, password)).toBe(false);
    expect(await accepted(device.serial, next.password)).toBe(true);
    expect(await rotationRow(rotation.id)).toMatchObject({ outcome: 'connected', secret_sealed: null });
  });

  it('after the grace period the old password is refused and the new one stays, confirmed or not', async () => {
    const { device, password } = await claim('RS-GRACE');
    const rotation = await harness.services.rotations.startPasswordRotation(account.admin, {
      serial: device.serial,
      graceS: 3600,
    });
    const next = passwordOf(await harness.services.rotations.deliveries(device));
    clock.advance(HOUR_MS - 1000);
    expect(await accepted(device.serial, password)).toBe(true);
    clock.advance(1000);
    // Refused at once by authentication, before anything settles the row.
    expect(await accepted(device.serial, password)).toBe(false);
    expect(await accepted(device.serial, next.password)).toBe(true);
    expect(await harness.services.rotations.expireDue()).toBeGreaterThanOrEqual(1);
    expect(await rotationRow(rotation.id)).toMatchObject({ outcome: 'grace_expired', secret_sealed: null });
    expect(await accepted(device.serial, password)).toBe(false);
    const after = await auth(device.serial, next.password);
    expect(after.ok && after.session.confirmsRotation).toBeUndefined();
    expect((await outboxEvents(device.serial)).map((e) => e.data.outcome)).toEqual(['grace_expired']);
  });

  it('takes a grace period of 1 hour to 30 days; anything else changes nothing', async () => {
    const { device, password } = await claim('RS-BOUNDS');
    for (const graceS of [3599, 30 * 86_400 + 1, 1.5]) {
      // The adapters answer a ZodError with 422 validation_failed (test/integration/credential-rotation.test.ts).
      const error: unknown = await harness.services.rotations
        .startPasswordRotation(account.admin, { serial: device.serial, graceS })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(error, String(graceS)).toBeInstanceOf(ZodError);
    }
    expect(await harness.services.rotations.deliveries(device)).toEqual([]);
    expect(await accepted(device.serial, password)).toBe(true);
    const longest = await harness.services.rotations.startPasswordRotation(account.admin, {
      serial: device.serial,
      graceS: 30 * 86_400,
    });
    expect(Date.parse(longest.graceEndsAt) - clock.now().getTime()).toBe(30 * DAY_MS);
  });

  it('a second planned rotation replaces the first: its password never becomes valid', async () => {
    const { device, password } = await claim('RS-TWICE');
    const first = await harness.services.rotations.startPasswordRotation(account.admin, { serial: device.serial });
    const firstPassword = passwordOf(await harness.services.rotations.deliveries(device)).password;
    const second = await harness.services.rotations.startPasswordRotation(account.admin, { serial: device.serial });
    const deliveries = await harness.services.rotations.deliveries(device);
    expect(deliveries).toHaveLength(1);
    expect(passwordOf(deliveries).rotationId).toBe(second.id);
    expect(await accepted(device.serial, firstPassword)).toBe(false);
    expect(await accepted(device.serial, password)).toBe(true);
    expect(await rotationRow(first.id)).toMatchObject({ outcome: 'replaced', secret_sealed: null });
    // An ack of the replaced rotation changes nothing.
    expect(await harness.services.rotations.acknowledge({ ...device, rotationId: first.id })).toBe('unknown');
    expect(await accepted(device.serial, password)).toBe(true);
  });

  it('the emergency rotation still revokes at once: old and pending passwords, and the session', async () => {
    const { device, password } = await claim('RS-EMERG');
    const planned = await harness.services.rotations.startPasswordRotation(account.admin, { serial: device.serial });
    const pending = passwordOf(await harness.services.rotations.deliveries(device)).password;
    const emergency = await harness.services.devices.rotateCredentials(account.admin, { serial: device.serial });
    expect(await accepted(device.serial, password)).toBe(false);
    expect(await accepted(device.serial, pending)).toBe(false);
    expect(await accepted(device.serial, emergency.password)).toBe(true);
    expect(disconnects).toContainEqual({ serial: device.serial, reason: 'credentials rotated' });
    expect(await harness.services.rotations.deliveries(device)).toEqual([]);
    expect(await rotationRow(planned.id)).toMatchObject({ outcome: 'revoked', secret_sealed: null });
    expect((await outboxEvents(device.serial)).map((e) => e.data)).toEqual([
      expect.objectContaining({ kind: 'password', mode: 'emergency', revokes: [planned.id] }),
    ]);
    const history = await harness.services.devices.history(account.admin, { serial: device.serial });
    expect(history.events.map((e) => e.type)).toEqual(
      expect.arrayContaining(['credentials_rotated', 'credentials_rotation_started']),
    );
  });

  it("is the admin's own account's: another account's serial is not found, a viewer is refused", async () => {
    const other = await harness.createAccount();
    await claim('RS-MINE');
    expect(
      (await refusal(harness.services.rotations.startPasswordRotation(other.admin, { serial: 'RS-MINE' }))).code,
    ).toBe('not_found');
    const viewer = { ...account.admin, role: 'viewer' as const };
    expect((await refusal(harness.services.rotations.startPasswordRotation(viewer, { serial: 'RS-MINE' }))).code).toBe(
      'forbidden',
    );
  });

  describe('certificate renewal from a CSR the device sent', () => {
    it('needs a certificate already, a CSR naming the serial, and one renewal at a time', async () => {
      const bare = await claim('RS-NOCERT');
      const csr = await makeCsr({ commonName: 'RS-NOCERT' });
      expect(await harness.services.rotations.requestCertificate({ ...bare.device, csr: csr.pem })).toEqual({
        ok: false,
        reason: 'no_certificate',
      });

      const { device } = await claim('RS-CSR', (await makeCsr({ commonName: 'RS-CSR' })).pem);
      const foreign = await makeCsr({ commonName: 'RS-OTHER' });
      expect(await harness.services.rotations.requestCertificate({ ...device, csr: foreign.pem })).toEqual({
        ok: false,
        reason: 'subject_mismatch',
      });
      expect(await harness.services.rotations.requestCertificate({ ...device, csr: 'not a csr' })).toEqual({
        ok: false,
        reason: 'csr_invalid',
      });
      expect(await harness.services.certificates.list(account.admin, { serial: device.serial })).toHaveLength(1);

      const renewal = await makeCsr({ commonName: 'RS-CSR' });
      const issued = await harness.services.rotations.requestCertificate({ ...device, csr: renewal.pem });
      expect(issued.ok).toBe(true);
      expect(offered).toContain('RS-CSR');
      expect(await harness.services.rotations.requestCertificate({ ...device, csr: renewal.pem })).toEqual({
        ok: false,
        reason: 'renewal_pending',
      });
    });

    it('keeps the old certificate until the device connects with the new one, then revokes it as superseded', async () => {
      const { device, certificate } = await claim('RS-RENEW', (await makeCsr({ commonName: 'RS-RENEW' })).pem);
      const renewal = await makeCsr({ commonName: 'RS-RENEW' });
      const issued = await harness.services.rotations.requestCertificate({ ...device, csr: renewal.pem });
      if (!issued.ok) throw new Error(issued.reason);
      const [delivery] = await harness.services.rotations.deliveries(device);
      if (delivery?.kind !== 'certificate') throw new Error('no certificate delivery');
      expect(delivery.rotationId).toBe(issued.rotationId);
      const byCertificate = (pem: string) =>
        harness.services.deviceAuth.authenticateCertificate({
          clientId: device.serial,
          username: undefined,
          certificate: peerCertificate(pem),
        });
      const old = await byCertificate(certificate!.certificatePem);
      expect(old.ok && old.session.rotationOpen).toBe(true);

      // Acknowledged: not delivered again, the old one still works.
      expect(await harness.services.rotations.acknowledge({ ...device, rotationId: issued.rotationId })).toBe(
        'acknowledged',
      );
      expect(await harness.services.rotations.deliveries(device)).toEqual([]);
      expect((await byCertificate(certificate!.certificatePem)).ok).toBe(true);

      const fresh = await byCertificate(delivery.certificatePem);
      if (!fresh.ok) throw new Error(fresh.reason);
      await harness.services.rotations.connected({
        ...device,
        certificateFingerprint: fresh.session.certificateFingerprint,
      });
      expect(await byCertificate(certificate!.certificatePem)).toEqual({ ok: false, reason: 'certificate_revoked' });
      expect((await byCertificate(delivery.certificatePem)).ok).toBe(true);
      const listed = await harness.services.certificates.list(account.admin, { serial: device.serial });
      expect(listed.map((c) => c.revokedReason).sort()).toEqual([null, 'superseded'].sort());
      expect((await outboxEvents(device.serial)).map((e) => e.data)).toEqual([
        expect.objectContaining({ kind: 'certificate', outcome: 'connected', rotation_id: issued.rotationId }),
      ]);
    });

    it('when the grace period ends first, the old certificate is revoked and its sessions closed', async () => {
      const { device, certificate } = await claim('RS-CERTEXP', (await makeCsr({ commonName: 'RS-CERTEXP' })).pem);
      const issued = await harness.services.rotations.requestCertificate({
        ...device,
        csr: (await makeCsr({ commonName: 'RS-CERTEXP' })).pem,
      });
      expect(issued.ok).toBe(true);
      clock.advance(7 * DAY_MS);
      expect(await harness.services.rotations.expireDue()).toBeGreaterThanOrEqual(1);
      expect(disconnects).toContainEqual({
        serial: device.serial,
        reason: 'certificate superseded',
        certificateFingerprint: certificate!.fingerprintSha256,
      });
      const listed = await harness.services.certificates.list(account.admin, { serial: device.serial });
      expect(listed.find((c) => c.fingerprintSha256 === certificate!.fingerprintSha256)?.revokedReason).toBe(
        'superseded',
      );
    });
  });
});
