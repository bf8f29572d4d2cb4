import { readCredentialsMessage } from '#protocol/credential-payloads';
import { makeKeyAndCsr } from './device-certificates';

/** MQTT credentials of one device, as the claim returns them (and rotations change them). */
export interface DeviceCredentials {
  serial: string;
  username: string;
  password: string;
  /**
   * A client certificate of the service's device CA and its key (PEM). With them the device
   * authenticates on MQTTS by its certificate and sends no username or password.
   */
  certificate?: string;
  privateKey?: string;
}

/** CONNACK 4: bad user name or password (this secret is not, or no longer, valid). */
const BAD_USERNAME_OR_PASSWORD = 4;

/**
 * What a module keeps of its secrets, and how it follows a planned rotation
 * (docs/device-protocol.md "Credentials rotation"):
 *
 * - a new password on `credentials` is stored at once (in flash, on a real module; here in
 *   `credentials`, and `onChange` saves the file), acknowledged on `credentials/ack`, and used
 *   for the next connection; the password before it is kept until a connection with the new one
 *   succeeded, so a CONNACK 4 with the new one falls back to it once;
 * - a certificate renewal: a new key and a CSR with the serial as CN on `csr`; the certificate
 *   that comes back on `credentials` is stored with that key, acknowledged, and used for the next
 *   connection, the previous one kept the same way;
 * - a CONNACK 4 by certificate with nothing older to fall back to: the next connections use the
 *   password (the certificate expired, or was revoked).
 */
export class DeviceSecrets {
  private previousPassword: string | undefined;
  private previousCertificate: { certificate: string; privateKey: string } | undefined;
  /** The key of the CSR sent and not answered yet. */
  private pendingKey: string | undefined;
  /** A certificate refused with nothing older: connect with the password instead. */
  private certificateRefused = false;
  /** The rotation ids already stored (a re-delivery is acknowledged again, not applied again). */
  private readonly applied = new Set<string>();

  constructor(
    readonly credentials: DeviceCredentials,
    private readonly onChange?: (credentials: DeviceCredentials) => void,
  ) {}

  /** What the next CONNECT presents. */
  connectOptions(): { cert: string; key: string } | { username: string; password: string } {
    const { certificate, privateKey, username, password } = this.credentials;
    if (certificate !== undefined && privateKey !== undefined && !this.certificateRefused)
      return { cert: certificate, key: privateKey };
    return { username, password };
  }

  /** A connection was accepted: the secret it used is the one to keep; the fallback goes. */
  accepted(): void {
    if ('password' in this.connectOptions()) this.previousPassword = undefined;
    else this.previousCertificate = undefined;
  }

  /**
   * A connection was refused with CONNACK `code`. True when another secret is to be tried at
   * once: the one before the last rotation (once), or the password after a certificate.
   */
  refused(code: number | undefined): boolean {
    if (code !== BAD_USERNAME_OR_PASSWORD) return false;
    const used = this.connectOptions();
    if ('cert' in used) {
      if (this.previousCertificate) {
        Object.assign(this.credentials, this.previousCertificate);
        this.previousCertificate = undefined;
      } else this.certificateRefused = true;
      this.onChange?.(this.credentials);
      return true;
    }
    if (this.previousPassword === undefined) return false;
    this.credentials.password = this.previousPassword;
    this.previousPassword = undefined;
    this.onChange?.(this.credentials);
    return true;
  }

  /** Starts a certificate renewal: the payload to publish on `csr` (null without a certificate, or while one is pending). */
  async renewalRequest(): Promise<string | null> {
    if (this.credentials.certificate === undefined || this.pendingKey !== undefined) return null;
    const { privateKey, csr } = await makeKeyAndCsr(this.credentials.serial);
    this.pendingKey = privateKey;
    return JSON.stringify({ csr });
  }

  /**
   * A message on `credentials`: stored, and the ack to publish returned (null for one the module
   * cannot use, which it ignores). `reconnect`: the new secret is to be used now.
   */
  receive(payload: Buffer): { ack: string; reconnect: boolean } | null {
    const message = readCredentialsMessage(payload);
    if (!message) return null;
    const ack = JSON.stringify({ rotation_id: message.rotation_id });
    if (this.applied.has(message.rotation_id)) return { ack, reconnect: false };
    if (message.type === 'password') {
      this.previousPassword = this.credentials.password;
      this.credentials.password = message.password;
    } else {
      if (this.pendingKey === undefined) return null;
      if (this.credentials.certificate !== undefined && this.credentials.privateKey !== undefined)
        this.previousCertificate = {
          certificate: this.credentials.certificate,
          privateKey: this.credentials.privateKey,
        };
      this.credentials.certificate = message.certificate;
      this.credentials.privateKey = this.pendingKey;
      this.pendingKey = undefined;
      this.certificateRefused = false;
    }
    this.applied.add(message.rotation_id);
    this.onChange?.(this.credentials);
    return { ack, reconnect: true };
  }
}
