import type { Knex } from 'knex';
import { z } from 'zod';
import type { ServiceDeps } from '../service-deps';
import { requireAdmin, type Actor } from '../shared/actor';
import { DomainError, notFound } from '../shared/errors';
import { newId } from '../shared/ids';
import { generateSecret, sha256Hex } from '../shared/secrets';
import type { ServerSecret } from '../shared/server-secret';
import { appendEvents } from '../events/outbox';
import type { DeviceCertificateService } from '../certificates/device-certificate.service';
import {
  hasUnrevokedCertificate,
  insertCertificates,
  revokeOtherCertificatesOfDevice,
  selectCertificateOfDevice,
} from '../certificates/certificate-records';
import { DEFAULT_ROTATION_GRACE_S, MAX_ROTATION_GRACE_S, MIN_ROTATION_GRACE_S } from '#protocol/credential-payloads';
import type { NewDeviceEvent } from './device-history';
import type { DeviceGateway } from './device-gateway';
import { isValidSerial } from './device-types';
import {
  graceEndsAt,
  promotesNewCredential,
  type RotationKind,
  type RotationOutcome,
} from './credential-rotation-rules';
import { findDeviceId, lockDevice } from './store/devices.store';
import { replaceCredential } from './store/credentials.store';
import { appendDeviceEvents } from './store/history.store';
import {
  anyDueRotation,
  finishRotation,
  insertRotation,
  lockDueRotations,
  markAcknowledged,
  selectOpenRotations,
  type OpenRotation,
} from './store/credential-rotations.store';

/** Purpose key of the server secret that seals a pending password until the rotation ends. */
export const PENDING_PASSWORD_PURPOSE = 'device-pending-password';

export const StartPasswordRotationInput = z.strictObject({
  /** Seconds the current password keeps working unless the device confirms first. */
  graceS: z.number().int().min(MIN_ROTATION_GRACE_S).max(MAX_ROTATION_GRACE_S).optional(),
});
export type StartPasswordRotationInput = z.infer<typeof StartPasswordRotationInput>;

/** A planned rotation as the API answers it: never the secret. */
export interface CredentialRotationView {
  id: string;
  serial: string;
  username: string;
  kind: RotationKind;
  state: 'pending';
  createdAt: string;
  graceEndsAt: string;
}

/** The device a broker connection belongs to (from its authenticated session). */
export interface RotationDevice {
  accountId: string;
  deviceId: string;
  serial: string;
}

/** What the broker delivers on `devices/{serial}/credentials` (it maps this to the protocol's payload). */
export type CredentialsDelivery =
  | { kind: 'password'; rotationId: string; username: string; password: string; graceEndsAt: Date }
  | {
      kind: 'certificate';
      rotationId: string;
      certificatePem: string;
      fingerprintSha256: string;
      notAfter: Date;
      graceEndsAt: Date;
    };

/**
 * Why a CSR a device sent was not answered with a certificate (counted per reason).
 * `renewal_pending`: one renewal at a time; `no_certificate`: renewal is for devices that hold a
 * certificate of the service that is not revoked; `csr_invalid`: unreadable, not self-signed or
 * a key type not taken; `subject_mismatch`: its subject CN is not the serial; `ca_unavailable`:
 * the device CA cannot sign (its key cannot be unsealed, or it expired).
 */
export type CsrRefusal = 'renewal_pending' | 'no_certificate' | 'csr_invalid' | 'subject_mismatch' | 'ca_unavailable';

/** What the broker's connections ask of rotations (DeviceDomain.rotations). */
export type DeviceRotations = Pick<
  CredentialRotationService,
  'connected' | 'deliveries' | 'acknowledge' | 'requestCertificate' | 'expireDue'
>;

/**
 * Planned credential rotations (docs/device-protocol.md "Credentials rotation"): a new password
 * delivered over the device's authenticated session, and certificates renewed from a CSR the
 * device publishes. The old credential keeps working until the device confirms the new one (an
 * ack, or a connection with it) or the grace period ends; the emergency rotation
 * (DeviceService.rotateCredentials) ends any of this at once.
 *
 * A pending password exists as its SHA-256 (what authentication compares) and, until the rotation
 * ends, sealed with the server secret so it can be delivered again on each connection; it is
 * never returned by the API, never queued in the broker and never logged.
 */
export class CredentialRotationService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly area: {
      gateway: DeviceGateway;
      certificates: Pick<DeviceCertificateService, 'signDeviceRequest'>;
      secrets: ServerSecret;
    },
  ) {}

  /**
   * A planned password rotation (admin): a new password the device receives over its session
   * (now if connected, else on its next connection), both passwords accepted until it confirms
   * or `graceS` (default 7 days, 1 hour to 30 days) passes. A rotation still pending is replaced.
   */
  async startPasswordRotation(
    actor: Actor,
    input: { serial: string } & StartPasswordRotationInput,
  ): Promise<CredentialRotationView> {
    requireAdmin(actor);
    const { graceS } = StartPasswordRotationInput.parse({ graceS: input.graceS });
    if (!isValidSerial(input.serial)) throw notFound('Device');
    const password = generateSecret('');
    const id = newId();
    const now = this.deps.clock.now();
    const ends = graceEndsAt(now, graceS ?? DEFAULT_ROTATION_GRACE_S);
    await this.deps.transaction(async (trx) => {
      const device = await lockDevice(trx, { accountId: actor.accountId, serial: input.serial });
      if (!device) throw notFound('Device');
      const replaced = await this.endOpen(trx, { deviceId: device.id, kind: 'password', outcome: 'replaced', now });
      await insertRotation(trx, {
        id,
        accountId: actor.accountId,
        deviceId: device.id,
        kind: 'password',
        secretHash: sha256Hex(password),
        secretSealed: this.area.secrets.encrypt(PENDING_PASSWORD_PURPOSE, password),
        requestedBy: actor.principal,
        now,
        graceEndsAt: ends,
      });
      await appendDeviceEvents(trx, {
        now,
        events: [
          {
            accountId: actor.accountId,
            deviceId: device.id,
            type: 'credentials_rotation_started',
            data: {
              kind: 'password',
              mode: 'in_band',
              rotation_id: id,
              grace_ends_at: ends.toISOString(),
              by: actor.principal,
              ...(replaced.length > 0 ? { replaces: replaced } : {}),
            },
          },
        ],
      });
    });
    this.area.gateway.offerCredentials(input.serial);
    return {
      id,
      serial: input.serial,
      username: input.serial,
      kind: 'password',
      state: 'pending',
      createdAt: now.toISOString(),
      graceEndsAt: ends.toISOString(),
    };
  }

  /**
   * Ends the device's open rotations of `kind` without their new credential taking effect (a newer
   * rotation replaces one; an emergency rotation revokes it). In the caller's transaction, after
   * it locked the device. Returns their ids.
   */
  private async endOpen(
    trx: Knex.Transaction,
    input: { deviceId: string; kind: RotationKind; outcome: 'replaced' | 'revoked'; now: Date },
  ): Promise<string[]> {
    const open = await selectOpenRotations(trx, { deviceId: input.deviceId, kind: input.kind, lock: true });
    for (const rotation of open)
      await finishRotation(trx, { rotationId: rotation.id, outcome: input.outcome, now: input.now });
    return open.map((r) => r.id);
  }

  /**
   * A connection of the device was accepted (after its CONNACK). Connecting with the pending
   * password (`confirmsRotation`) or with the certificate a renewal issued confirms that rotation.
   */
  async connected(
    device: RotationDevice & { confirmsRotation?: string | undefined; certificateFingerprint?: string | undefined },
  ): Promise<void> {
    const { confirmsRotation, certificateFingerprint } = device;
    if (confirmsRotation === undefined && certificateFingerprint === undefined) return;
    const superseded = await this.deps.transaction(async (trx) => {
      const open = await selectOpenRotations(trx, { deviceId: device.deviceId, lock: true });
      const confirmed = open.find((r) =>
        r.kind === 'password' ? r.id === confirmsRotation : r.fingerprintSha256 === certificateFingerprint,
      );
      if (!confirmed) return [];
      return this.finish(trx, confirmed, 'connected');
    });
    this.closeSessionsOf(device.serial, superseded);
  }

  /** What to deliver on the device's `credentials` topic now: open rotations it has not acknowledged. */
  async deliveries(device: RotationDevice): Promise<CredentialsDelivery[]> {
    const open = await selectOpenRotations(this.deps.knex, { deviceId: device.deviceId });
    const deliveries: CredentialsDelivery[] = [];
    for (const rotation of open) {
      if (rotation.kind === 'password') {
        if (rotation.secretSealed === null) continue;
        deliveries.push({
          kind: 'password',
          rotationId: rotation.id,
          username: rotation.serial,
          password: this.area.secrets.decrypt(PENDING_PASSWORD_PURPOSE, rotation.secretSealed),
          graceEndsAt: rotation.graceEndsAt,
        });
      } else if (rotation.acknowledgedAt === null && rotation.fingerprintSha256 !== null) {
        const certificate = await selectCertificateOfDevice(this.deps.knex, {
          deviceId: device.deviceId,
          fingerprint: rotation.fingerprintSha256,
        });
        if (!certificate || certificate.revokedAt !== null) continue;
        deliveries.push({
          kind: 'certificate',
          rotationId: rotation.id,
          certificatePem: certificate.certificatePem,
          fingerprintSha256: certificate.fingerprintSha256,
          notAfter: new Date(certificate.notAfter),
          graceEndsAt: rotation.graceEndsAt,
        });
      }
    }
    return deliveries;
  }

  /**
   * The device stored what it received (`credentials/ack`). A password rotation is complete: the
   * previous password is refused from now on. A certificate is no longer delivered; the previous
   * certificate still works until the device connects with the new one or the grace period ends.
   * `unknown`: no open rotation of this device has that id (a stale or foreign ack).
   */
  async acknowledge(
    device: RotationDevice & { rotationId: string },
  ): Promise<'completed' | 'acknowledged' | 'unknown'> {
    return this.deps.transaction(async (trx) => {
      const open = await selectOpenRotations(trx, { deviceId: device.deviceId, lock: true });
      const rotation = open.find((r) => r.id === device.rotationId);
      if (!rotation) return 'unknown';
      if (rotation.kind === 'certificate') {
        await markAcknowledged(trx, { rotationId: rotation.id, now: this.deps.clock.now() });
        return 'acknowledged';
      }
      await this.finish(trx, rotation, 'acknowledged');
      return 'completed';
    });
  }

  /**
   * A CSR the device published on `devices/{serial}/csr`: signed into a certificate (subject
   * CN = the serial, which the request must name too) and delivered on `credentials`; the
   * device's other certificates keep working until it connects with the new one or the grace
   * period (7 days) ends. One renewal at a time, for a device that holds a certificate.
   */
  async requestCertificate(
    device: RotationDevice & { csr: string },
  ): Promise<{ ok: true; rotationId: string } | { ok: false; reason: CsrRefusal }> {
    const { knex } = this.deps;
    // The cheap refusals first: a device repeating its CSR costs one indexed read, not a signature check.
    if ((await selectOpenRotations(knex, { deviceId: device.deviceId, kind: 'certificate' })).length > 0)
      return { ok: false, reason: 'renewal_pending' };
    if (!(await hasUnrevokedCertificate(knex, { deviceId: device.deviceId })))
      return { ok: false, reason: 'no_certificate' };
    let signed: Awaited<ReturnType<DeviceCertificateService['signDeviceRequest']>>;
    try {
      signed = await this.area.certificates.signDeviceRequest({ serial: device.serial, csr: device.csr });
    } catch (error) {
      if (error instanceof DomainError && error.code === 'service_unavailable') {
        this.deps.logger.error({ err: error, serial: device.serial }, 'the device CA cannot sign a renewal');
        return { ok: false, reason: 'ca_unavailable' };
      }
      throw error;
    }
    if (!signed.ok) return signed;
    const { issued } = signed;
    const id = newId();
    const now = this.deps.clock.now();
    const ends = graceEndsAt(now, DEFAULT_ROTATION_GRACE_S);
    try {
      await this.deps.transaction(async (trx) => {
        // Shares the lock unclaim takes: nothing is recorded for a device being deleted.
        const deviceId = await findDeviceId(trx, { accountId: device.accountId, serial: device.serial, lock: 'share' });
        if (deviceId !== device.deviceId) throw notFound('Device');
        await insertCertificates(trx, { accountId: device.accountId, now, certificates: [{ deviceId, issued }] });
        await insertRotation(trx, {
          id,
          accountId: device.accountId,
          deviceId,
          kind: 'certificate',
          fingerprintSha256: issued.fingerprintSha256,
          requestedBy: `device:${device.serial}`,
          now,
          graceEndsAt: ends,
        });
        await appendDeviceEvents(trx, {
          now,
          events: [
            {
              accountId: device.accountId,
              deviceId,
              type: 'certificate_issued',
              data: {
                fingerprint_sha256: issued.fingerprintSha256,
                not_after: issued.notAfter.toISOString(),
                key_algorithm: issued.keyAlgorithm,
                by: `device:${device.serial}`,
                via: 'csr',
              },
            },
            {
              accountId: device.accountId,
              deviceId,
              type: 'credentials_rotation_started',
              data: {
                kind: 'certificate',
                mode: 'in_band',
                rotation_id: id,
                fingerprint_sha256: issued.fingerprintSha256,
                grace_ends_at: ends.toISOString(),
                by: `device:${device.serial}`,
              },
            },
          ],
        });
      });
    } catch (error) {
      // Two CSRs racing: the partial unique index of open rotations lets one through.
      if ((error as { code?: string }).code === '23505') return { ok: false, reason: 'renewal_pending' };
      if (error instanceof DomainError && error.code === 'not_found') return { ok: false, reason: 'no_certificate' };
      throw error;
    }
    this.area.gateway.offerCredentials(device.serial);
    return { ok: true, rotationId: id };
  }

  /**
   * Ends rotations whose grace period is over (the broker's presence sweep calls it every few
   * seconds): the new credential becomes the only one, the sealed password is erased, a
   * certificate the device never used replaces the old ones (revoked `superseded`, their sessions
   * closed). Authentication already refuses an old password past the grace period; this settles
   * the rows, the history and the event. Returns how many ended.
   */
  async expireDue(limit = 100): Promise<number> {
    const now = this.deps.clock.now();
    // Almost always nothing is due: one indexed read, no transaction.
    if (!(await anyDueRotation(this.deps.knex, { now }))) return 0;
    const ended = await this.deps.transaction(async (trx) => {
      const due = await lockDueRotations(trx, { now, limit });
      const results: Array<{ serial: string; superseded: string[] }> = [];
      for (const rotation of due)
        results.push({ serial: rotation.serial, superseded: await this.finish(trx, rotation, 'grace_expired') });
      return results;
    });
    for (const { serial, superseded } of ended) this.closeSessionsOf(serial, superseded);
    return ended.length;
  }

  /**
   * Ends one open rotation with an outcome that puts its new credential in place: the password
   * becomes the device's, or the renewed certificate its only one. History and
   * `device.credentials_rotated` in the same transaction. Returns the certificates superseded.
   */
  private async finish(trx: Knex.Transaction, rotation: OpenRotation, outcome: RotationOutcome): Promise<string[]> {
    const now = this.deps.clock.now();
    await finishRotation(trx, { rotationId: rotation.id, outcome, now });
    if (!promotesNewCredential(outcome)) return [];
    let superseded: string[] = [];
    if (rotation.kind === 'password' && rotation.secretHash !== null) {
      await replaceCredential(trx, { deviceId: rotation.deviceId, secretHash: rotation.secretHash, now });
    } else if (rotation.kind === 'certificate' && rotation.fingerprintSha256 !== null) {
      superseded = await revokeOtherCertificatesOfDevice(trx, {
        deviceId: rotation.deviceId,
        keep: rotation.fingerprintSha256,
        now,
        reason: 'superseded',
      });
    }
    const history: NewDeviceEvent[] = superseded.map((fingerprint) => ({
      accountId: rotation.accountId,
      deviceId: rotation.deviceId,
      type: 'certificate_revoked',
      data: { fingerprint_sha256: fingerprint, reason: 'superseded', rotation_id: rotation.id },
    }));
    const data = {
      kind: rotation.kind,
      mode: 'in_band',
      rotation_id: rotation.id,
      outcome,
      by: rotation.requestedBy,
      ...(rotation.fingerprintSha256 !== null ? { fingerprint_sha256: rotation.fingerprintSha256 } : {}),
    };
    history.push({ accountId: rotation.accountId, deviceId: rotation.deviceId, type: 'credentials_rotated', data });
    await appendDeviceEvents(trx, { now, events: history });
    await appendEvents(trx, this.deps.clock, [
      {
        accountId: rotation.accountId,
        type: 'device.credentials_rotated',
        subject: rotation.serial,
        data: { serial: rotation.serial, device_id: rotation.deviceId, ...data },
      },
    ]);
    return superseded;
  }

  /** Sessions that authenticated with a superseded certificate are closed, on whichever process holds them. */
  private closeSessionsOf(serial: string, fingerprints: string[]): void {
    for (const fingerprint of fingerprints)
      this.area.gateway.disconnect(serial, 'certificate superseded', { certificateFingerprint: fingerprint });
  }
}
