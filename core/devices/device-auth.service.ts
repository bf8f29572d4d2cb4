import type { ServiceDeps } from '../service-deps';
import { sha256Hex } from '../shared/secrets';
import { LookupBatcher } from '../shared/lookup-batcher';
import type { DeviceCa } from '../certificates/device-ca';
import {
  checkPeerCertificate,
  type PeerCertificate,
  type PeerCertificateRefusal,
} from '../certificates/peer-certificate';
import { isValidSerial, type DeviceIdentity } from './device-types';
import { passwordVerdict } from './credential-rotation-rules';
import {
  selectCertificateCredentials,
  selectCredentialsBySerials,
  type StoredCertificateCredential,
  type StoredCredential,
} from './store/credentials.store';

/** What the broker keeps about an authenticated connection (nothing secret). */
export interface DeviceSession {
  deviceId: string;
  accountId: string;
  serial: string;
  /**
   * Desired configuration as read at authentication (version 0: none): what the broker sends
   * once on the connection when it cannot read a fresher one (broker/src/config-delivery.ts).
   */
  desiredConfigVersion: number;
  desiredConfig: Record<string, unknown>;
  /**
   * Set when the session authenticated with a client certificate (SHA-256 of its DER, lowercase
   * hex): revoking that certificate closes this session and no other.
   */
  certificateFingerprint?: string;
  /**
   * The device has an open planned rotation (a pending password, a renewed certificate): the
   * broker offers it on this connection once the device subscribed to `credentials`.
   */
  rotationOpen?: boolean;
  /** The rotation whose new password this connection authenticated with: connecting confirms it. */
  confirmsRotation?: string;
}

/**
 * Why a connection is refused. The broker answers `invalid_client` with CONNACK 2 (identifier
 * rejected), `unknown_serial` (not claimed, or unclaimed since) with 5 (not authorized: no
 * secret of the device will do until it is claimed again), and every other reason with 4 (bad
 * user name or password: this credential is not, or no longer, valid). Whether a serial is
 * claimed is no secret (a claim answers `already_claimed` to any account); which password or
 * certificate failed is only in logs and metrics.
 */
export type DeviceAuthRefusal =
  | 'unknown_serial'
  | 'bad_password'
  | 'invalid_client'
  /** Not an X.509 certificate we can read. */
  | 'certificate_invalid'
  /** Not signed by our device CA, or a CA certificate. */
  | 'certificate_untrusted'
  /** Outside its validity (expired, or not valid yet). */
  | 'certificate_expired'
  /** Signed by our CA but not issued by this service to this device (or the device is gone). */
  | 'certificate_unknown'
  | 'certificate_revoked';

export type DeviceAuthResult = { ok: true; session: DeviceSession } | { ok: false; reason: DeviceAuthRefusal };

/**
 * Device authentication: a password, or a client certificate of our device CA.
 *
 * Device passwords are 256-bit random secrets, stored only as sha256(password), so one SHA-256
 * and a constant-time compare is enough (scrypt would make a reconnect storm of 10,000 devices
 * cost minutes of CPU). Certificates are checked against the CA (signature, validity, CN) and
 * then looked up by fingerprint: known to this service, not revoked, device still claimed.
 *
 * Nothing is cached: every connection reads the current hash or certificate row, so a rotation,
 * an unclaim or a revocation refuses the very next attempt on every process. Lookups arriving
 * within a few milliseconds (LOOKUP_WINDOW_MS) are answered by one query (a reconnect storm
 * becomes a few `= ANY(...)` reads instead of thousands of single-row ones).
 */
export class DeviceAuthService {
  private readonly credentials: LookupBatcher<StoredCredential>;
  private readonly certificates: LookupBatcher<StoredCertificateCredential>;

  constructor(
    private readonly deps: Pick<ServiceDeps, 'knex' | 'logger' | 'clock'>,
    private readonly area: { ca?: DeviceCa | undefined } = {},
  ) {
    this.credentials = new LookupBatcher({
      fetch: (serials) => selectCredentialsBySerials(deps.knex, { serials }),
      keyOf: (r) => r.device.serial,
      logger: deps.logger,
      what: 'device credential lookup',
    });
    this.certificates = new LookupBatcher({
      fetch: (fingerprints) => selectCertificateCredentials(deps.knex, { fingerprints }),
      keyOf: (r) => r.fingerprintSha256,
      logger: deps.logger,
      what: 'device certificate lookup',
    });
  }

  async authenticate(input: {
    clientId: string;
    username: string | undefined;
    password: Buffer | undefined;
  }): Promise<DeviceAuthResult> {
    const { clientId, username, password } = input;
    // Client id = username = serial; anything else is an identifier we do not issue.
    if (!isValidSerial(clientId) || username !== clientId) return { ok: false, reason: 'invalid_client' };
    const row = await this.credentials.lookup(clientId);
    if (!row) return { ok: false, reason: 'unknown_serial' };
    if (!password || password.length === 0 || password.length > 256) return { ok: false, reason: 'bad_password' };
    // During a planned rotation the pending password is accepted, and the current one until the
    // grace period ends (credential-rotation-rules.ts).
    const verdict = passwordVerdict({
      presentedHash: sha256Hex(password),
      currentHash: row.secretHash,
      pending: row.pending,
      now: this.deps.clock.now(),
    });
    if (verdict === 'refused') return { ok: false, reason: 'bad_password' };
    const session = toSession(row.device);
    if (row.rotationOpen) session.rotationOpen = true;
    if (verdict === 'pending' && row.pending) session.confirmsRotation = row.pending.rotationId;
    return { ok: true, session };
  }

  /**
   * A connection that presented a client certificate (mutual TLS) instead of a password.
   * `certificate` is what node:tls returns from `socket.getPeerCertificate(true)`; only its DER
   * (`raw`) is read. Accepted when: the client id is a serial and the username, if given, equals
   * it; the certificate is signed by our device CA and within its validity now; its subject CN
   * equals the client id; its fingerprint is one this service issued to the device currently
   * claimed under that serial; and it is not revoked.
   *
   * Refusals: `invalid_client` (client id not a serial, username or CN different from the client
   * id), `certificate_invalid`, `certificate_untrusted`, `certificate_expired`,
   * `certificate_unknown`, `certificate_revoked`. Throws when the database cannot be asked
   * (the broker answers CONNACK 3).
   */
  async authenticateCertificate(input: {
    clientId: string;
    username: string | undefined;
    certificate: PeerCertificate;
  }): Promise<DeviceAuthResult> {
    const { clientId, username } = input;
    if (!isValidSerial(clientId) || (username !== undefined && username !== clientId))
      return { ok: false, reason: 'invalid_client' };
    if (!this.area.ca) return refuse('certificate_untrusted');
    const ca = await this.area.ca.certificate();
    const checked = checkPeerCertificate({ certificate: input.certificate, ca, now: this.deps.clock.now() });
    if (!checked.ok) return refuse(checked.reason);
    if (checked.commonName !== clientId) return { ok: false, reason: 'invalid_client' };
    const row = await this.certificates.lookup(checked.fingerprintSha256);
    if (!row) return refuse('certificate_unknown');
    if (row.revokedAt !== null) return refuse('certificate_revoked');
    // Unclaiming revokes in the same transaction; a row without its device is refused all the same.
    if (row.device === null || row.device.serial !== clientId) return refuse('certificate_unknown');
    return {
      ok: true,
      session: {
        ...toSession(row.device),
        certificateFingerprint: checked.fingerprintSha256,
        ...(row.rotationOpen ? { rotationOpen: true } : {}),
      },
    };
  }
}

function refuse(reason: PeerCertificateRefusal | 'certificate_unknown' | 'certificate_revoked'): DeviceAuthResult {
  return { ok: false, reason };
}

function toSession(device: DeviceIdentity): DeviceSession {
  return {
    deviceId: device.id,
    accountId: device.accountId,
    serial: device.serial,
    desiredConfigVersion: device.desiredConfigVersion,
    desiredConfig: device.desiredConfig,
  };
}
