import { createPrivateKey, randomBytes, X509Certificate as NodeX509Certificate, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { ServiceDeps } from '../service-deps';
import type { ServerSecret } from '../shared/server-secret';
import { DomainError } from '../shared/errors';
import { sha256Hex } from '../shared/secrets';
import { keyAlgorithmOf, ACCEPTED_KEY_TYPES, type KeyAlgorithm } from './key-algorithms';
import { webCrypto, x509 } from './x509';
import { insertCaUnlessStored, selectStoredCa } from './store/device-ca.store';

/** Purpose key of the server secret that seals the created CA's private key. */
export const DEVICE_CA_KEY_PURPOSE = 'device-ca-key';
/** Lifetime of a CA the service creates: lighting stays installed for decades. */
const CREATED_CA_YEARS = 30;

/** DEVICE_CA_CERT_FILE and DEVICE_CA_KEY_FILE: the manufacturer's own CA (PEM files). */
export interface DeviceCaFiles {
  certFile: string;
  keyFile: string;
}

/** The public half of the device CA: all that verifying a device's certificate needs. */
export interface DeviceCaCertificate {
  pem: string;
  /** node:crypto's parse, for verifying peer certificates synchronously. */
  node: NodeX509Certificate;
  /** @peculiar/x509's parse, for the issuer name and key identifier of what we issue. */
  parsed: x509.X509Certificate;
  fingerprintSha256: string;
  notAfter: Date;
  source: 'files' | 'database';
}

export interface DeviceCaSigner {
  key: CryptoKey;
  algorithm: KeyAlgorithm;
}

interface Loaded {
  certificate: DeviceCaCertificate;
  /** Files: the key, converted at load. Database: unsealed on first signature. */
  signer: (() => Promise<DeviceCaSigner>) | Promise<DeviceCaSigner>;
}

/**
 * The device CA: the manufacturer's (DEVICE_CA_CERT_FILE and DEVICE_CA_KEY_FILE), or one the
 * service creates once and keeps in the database with its private key sealed under the server
 * secret, so every process sharing the database signs and verifies with the same CA.
 *
 * The CA never changes while a process runs, so it is loaded once. A load that failed (the
 * database was down) is tried again by the next caller. A database CA whose key cannot be
 * unsealed (FLEET_SECRET differs from the process that created it) still verifies devices;
 * only issuing fails, with `service_unavailable`.
 */
export class DeviceCa {
  private loading: Promise<Loaded> | undefined;
  private signing: Promise<DeviceCaSigner> | undefined;

  constructor(
    private readonly deps: Pick<ServiceDeps, 'knex' | 'clock' | 'logger'>,
    private readonly options: { serverSecret?: ServerSecret | undefined; files?: DeviceCaFiles | undefined } = {},
  ) {}

  /** Loads (or creates) the CA now: start calls it so that a bad CA file stops the start. */
  async load(): Promise<DeviceCaCertificate> {
    return (await this.loaded()).certificate;
  }

  /** The CA certificate (PEM and parsed). */
  certificate(): Promise<DeviceCaCertificate> {
    return this.load();
  }

  /** The private key to sign device certificates with. */
  async signer(): Promise<DeviceCaSigner> {
    const loaded = await this.loaded();
    if (typeof loaded.signer !== 'function') return loaded.signer;
    this.signing ??= loaded.signer().catch((error: unknown) => {
      this.signing = undefined;
      throw error;
    });
    return this.signing;
  }

  private loaded(): Promise<Loaded> {
    this.loading ??= (this.options.files ? this.fromFiles(this.options.files) : this.fromDatabase()).catch(
      (error: unknown) => {
        this.loading = undefined;
        throw error;
      },
    );
    return this.loading;
  }

  private async fromFiles(files: DeviceCaFiles): Promise<Loaded> {
    const certPem = await readFile(files.certFile, 'utf8').catch((error: unknown) => {
      throw new Error(`DEVICE_CA_CERT_FILE ${files.certFile} cannot be read (${whyUnreadable(error)}).`, {
        cause: error,
      });
    });
    const keyPem = await readFile(files.keyFile, 'utf8').catch((error: unknown) => {
      throw new Error(`DEVICE_CA_KEY_FILE ${files.keyFile} cannot be read (${whyUnreadable(error)}).`, {
        cause: error,
      });
    });
    const certificate = parseCaCertificate(certPem, 'files', 'DEVICE_CA_CERT_FILE');
    let key: KeyObject;
    try {
      key = createPrivateKey({ key: keyPem, format: 'pem' });
    } catch {
      // The library's message is not quoted: it could echo part of the key.
      throw new Error(
        `DEVICE_CA_KEY_FILE ${files.keyFile} is not an unencrypted PEM private key (PKCS#8, SEC1 or PKCS#1).`,
      );
    }
    if (!certificate.node.checkPrivateKey(key)) {
      throw new Error(
        `DEVICE_CA_KEY_FILE ${files.keyFile} is not the private key of the certificate in DEVICE_CA_CERT_FILE ${files.certFile}.`,
      );
    }
    const signer = await toSigner(key, 'DEVICE_CA_KEY_FILE');
    if (certificate.notAfter.getTime() <= this.deps.clock.now().getTime()) {
      this.deps.logger.error(
        { notAfter: certificate.notAfter.toISOString() },
        'the device CA of DEVICE_CA_CERT_FILE has expired: no device certificate can be issued or accepted',
      );
    }
    this.deps.logger.info(
      { fingerprint: certificate.fingerprintSha256, notAfter: certificate.notAfter.toISOString() },
      'device CA loaded from DEVICE_CA_CERT_FILE',
    );
    return { certificate, signer: Promise.resolve(signer) };
  }

  private async fromDatabase(): Promise<Loaded> {
    let stored = await selectStoredCa(this.deps.knex);
    if (!stored) {
      const created = await this.create();
      // Processes starting together may each create one: the first insert wins, the others
      // read it back and drop their own.
      await insertCaUnlessStored(this.deps.knex, { ca: created, now: this.deps.clock.now() });
      stored = await selectStoredCa(this.deps.knex);
      if (!stored) throw new Error('the device CA row vanished right after it was written');
      if (stored.certificatePem === created.certificatePem)
        this.deps.logger.info('device CA created and stored in the database');
    }
    const sealed = stored.sealedKey;
    return {
      certificate: parseCaCertificate(stored.certificatePem, 'database', 'the stored device CA'),
      signer: () => this.unseal(sealed),
    };
  }

  private async unseal(sealed: string): Promise<DeviceCaSigner> {
    const secret = this.requireSecret();
    let pem: string;
    try {
      pem = secret.decrypt(DEVICE_CA_KEY_PURPOSE, sealed);
    } catch {
      this.deps.logger.error(
        'the device CA key cannot be unsealed with this server secret (FLEET_SECRET differs from the process that created it)',
      );
      throw new DomainError(
        'service_unavailable',
        'The device CA key cannot be unsealed with this server secret; certificates cannot be issued.',
      );
    }
    return toSigner(createPrivateKey({ key: pem, format: 'pem' }), 'the stored device CA key');
  }

  private requireSecret(): ServerSecret {
    if (!this.options.serverSecret)
      throw new DomainError(
        'service_unavailable',
        'Device certificates need the server secret, which this process did not load.',
      );
    return this.options.serverSecret;
  }

  /** A self-signed P-256 CA that may sign end-entity certificates only (path length 0). */
  private async create(): Promise<{ certificatePem: string; sealedKey: string }> {
    const secret = this.requireSecret();
    const keys = await webCrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
    const now = this.deps.clock.now();
    const notAfter = new Date(now);
    notAfter.setUTCFullYear(notAfter.getUTCFullYear() + CREATED_CA_YEARS);
    const certificate = await x509.X509CertificateGenerator.createSelfSigned(
      {
        serialNumber: randomSerialNumber(),
        // A random suffix tells apart the CAs of several deployments in a device's trust store.
        name: [{ CN: [`Fleet device CA ${randomBytes(4).toString('hex')}`] }],
        // An hour back: a clock a little behind elsewhere still takes it as valid.
        notBefore: new Date(now.getTime() - 3_600_000),
        notAfter,
        keys,
        signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
        extensions: [
          new x509.BasicConstraintsExtension(true, 0, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
          await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, webCrypto),
        ],
      },
      webCrypto,
    );
    const pkcs8 = Buffer.from(await webCrypto.subtle.exportKey('pkcs8', keys.privateKey));
    const keyPem = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' })
      .export({ type: 'pkcs8', format: 'pem' })
      .toString();
    return { certificatePem: certificate.toString('pem'), sealedKey: secret.encrypt(DEVICE_CA_KEY_PURPOSE, keyPem) };
  }
}

/** Why a file could not be read, as short as the operator needs it: the errno code (ENOENT, EACCES) or the message. */
function whyUnreadable(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as NodeJS.ErrnoException).code;
  return code ?? error.message;
}

/** Parses the first certificate of a PEM file and checks it may act as a CA. */
function parseCaCertificate(pem: string, source: DeviceCaCertificate['source'], what: string): DeviceCaCertificate {
  let node: NodeX509Certificate;
  let parsed: x509.X509Certificate;
  try {
    node = new NodeX509Certificate(pem);
    parsed = new x509.X509Certificate(node.raw);
  } catch {
    throw new Error(`${what} is not a PEM X.509 certificate.`);
  }
  // Without CA:TRUE, TLS libraries (and node:crypto's checkIssued) refuse what it signs.
  if (!node.ca) throw new Error(`${what} is not a CA certificate (basicConstraints CA:TRUE is missing).`);
  const algorithm = keyAlgorithmOf(node.publicKey);
  if (!algorithm) throw new Error(`${what} has a key type the service cannot sign with (${ACCEPTED_KEY_TYPES}).`);
  return {
    pem: node.toString(),
    node,
    parsed,
    fingerprintSha256: sha256Hex(node.raw),
    notAfter: parsed.notAfter,
    source,
  };
}

async function toSigner(key: KeyObject, what: string): Promise<DeviceCaSigner> {
  const algorithm = keyAlgorithmOf(key);
  if (!algorithm) throw new Error(`${what} has a key type the service cannot sign with (${ACCEPTED_KEY_TYPES}).`);
  const pkcs8 = key.export({ type: 'pkcs8', format: 'der' });
  // Not extractable: the key can sign and nothing else, not even be read back.
  const cryptoKey = await webCrypto.subtle.importKey('pkcs8', pkcs8, algorithm.importParams, false, ['sign']);
  return { key: cryptoKey, algorithm };
}

/** 16 random bytes, top bit clear (positive) and first byte non-zero (DER integers are minimal): TLS libraries refuse negative serial numbers and ones over 20 bytes. */
export function randomSerialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x40;
  return bytes.toString('hex');
}
