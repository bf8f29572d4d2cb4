import { DomainError, type FieldError } from '../shared/errors';
import { sha256Hex } from '../shared/secrets';
import { ACCEPTED_KEY_TYPES, keyAlgorithmOfSpki } from './key-algorithms';
import { randomSerialNumber, type DeviceCaCertificate, type DeviceCaSigner } from './device-ca';
import { webCrypto, x509 } from './x509';

/** Longest CSR accepted, in characters of PEM (an RSA-8192 request is about 3,300). */
export const MAX_CSR_CHARS = 10_000;

const PEM_HEADER = /-----BEGIN (NEW )?CERTIFICATE REQUEST-----/;

/** A CSR whose signature verified with its own key: proof its sender holds the private key. */
export interface VerifiedCsr {
  publicKey: x509.PublicKey;
  /** `P-256`, `Ed25519`, `RSA-2048`, ... */
  keyAlgorithm: string;
  /** The subject's CN as the request asks for it (null without one): a renewal over MQTT checks it. */
  commonName: string | null;
}

export interface IssuedCertificate {
  serial: string;
  pem: string;
  fingerprintSha256: string;
  /** Hex, as `openssl x509 -serial` prints it (lowercase). */
  serialNumber: string;
  keyAlgorithm: string;
  notBefore: Date;
  notAfter: Date;
}

/** Why a CSR is refused: one sentence the caller can act on. */
export class CsrProblem extends Error {}

/**
 * Parses a PEM PKCS#10 request and checks its self-signature and key type. The subject and any
 * extensions it asks for are ignored: what the certificate says is the service's decision.
 */
export async function verifyCsr(pem: string): Promise<VerifiedCsr> {
  if (pem.length > MAX_CSR_CHARS) throw new CsrProblem(`is longer than ${MAX_CSR_CHARS} characters`);
  if (!PEM_HEADER.test(pem))
    throw new CsrProblem('is not a PEM certificate request (-----BEGIN CERTIFICATE REQUEST-----)');
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(pem.trim());
  } catch {
    throw new CsrProblem('is not a readable PKCS#10 certificate request');
  }
  const algorithm = keyAlgorithmOfSpki(csr.publicKey.rawData);
  if (!algorithm) throw new CsrProblem(`has a key type the service does not sign (${ACCEPTED_KEY_TYPES})`);
  let valid: boolean;
  try {
    valid = await csr.verify(webCrypto);
  } catch {
    valid = false;
  }
  if (!valid) throw new CsrProblem('has a signature that does not verify with its own public key');
  let commonName: string | null;
  try {
    commonName = csr.subjectName.getField('CN')[0] ?? null;
  } catch {
    commonName = null;
  }
  return { publicKey: csr.publicKey, keyAlgorithm: algorithm.label, commonName };
}

/** `csr_invalid` for one or more refused requests, each named by its field. */
export function csrInvalid(errors: FieldError[], details?: Record<string, unknown>): DomainError {
  const message =
    errors.length === 1
      ? `The certificate request ${errors[0]!.message}.`
      : `${errors.length} certificate requests are invalid; nothing was done.`;
  return new DomainError('csr_invalid', message, { errors, ...(details ? { details } : {}) });
}

/**
 * Signs a device certificate: subject CN = the serial whatever the request asked for, the
 * request's public key, a client-authentication key usage only, a random serial number, valid
 * from an hour ago (devices' and brokers' clocks differ a little) for `days`, never past the
 * CA itself.
 */
export async function issueCertificate(input: {
  ca: { certificate: DeviceCaCertificate; signer: DeviceCaSigner };
  request: VerifiedCsr;
  serial: string;
  now: Date;
  days: number;
}): Promise<IssuedCertificate> {
  const { ca, request, serial, now } = input;
  if (ca.certificate.notAfter.getTime() <= now.getTime()) {
    throw new DomainError(
      'service_unavailable',
      `The device CA expired on ${ca.certificate.notAfter.toISOString()}; no certificate can be issued.`,
    );
  }
  const notBefore = new Date(now.getTime() - 3_600_000);
  const notAfter = new Date(Math.min(now.getTime() + input.days * 86_400_000, ca.certificate.notAfter.getTime()));
  // The authority key identifier must repeat the CA's subject key identifier when it has one,
  // or path building in TLS libraries does not match the two.
  const caKeyId = ca.certificate.parsed.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId;
  const authorityKeyId = caKeyId
    ? new x509.AuthorityKeyIdentifierExtension(caKeyId, false)
    : await x509.AuthorityKeyIdentifierExtension.create(ca.certificate.parsed.publicKey, false, webCrypto);
  const certificate = await x509.X509CertificateGenerator.create(
    {
      serialNumber: randomSerialNumber(),
      subject: [{ CN: [serial] }],
      // The CA's own encoded name, so the issuer matches its subject byte for byte.
      issuer: ca.certificate.parsed.subjectName,
      notBefore,
      notAfter,
      publicKey: request.publicKey,
      signingKey: ca.signer.key,
      signingAlgorithm: ca.signer.algorithm.signParams,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth], false),
        await x509.SubjectKeyIdentifierExtension.create(request.publicKey, false, webCrypto),
        authorityKeyId,
      ],
    },
    webCrypto,
  );
  const der = Buffer.from(certificate.rawData);
  return {
    serial,
    pem: certificate.toString('pem'),
    fingerprintSha256: sha256Hex(der),
    serialNumber: certificate.serialNumber.toLowerCase(),
    keyAlgorithm: request.keyAlgorithm,
    notBefore: certificate.notBefore,
    notAfter: certificate.notAfter,
  };
}
