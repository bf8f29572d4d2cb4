import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';
import { DomainError } from '../shared/errors';

/**
 * Ed25519 firmware signatures (docs/signed-firmware.md, docs/device-protocol.md "Signed
 * firmware"). The signed message is the raw 32-byte SHA-256 digest of the image, not the image:
 * a module verifies after hashing the download it already hashes for `sha256`, without holding
 * the image in RAM, and `openssl pkeyutl -sign -rawin` signs the digest file as it is.
 *
 * Pure functions with no service around them: the service, the simulator and the tests verify
 * the same way a device does.
 */

/** An Ed25519 signature is 64 bytes: 88 base64 characters with padding. */
const SIGNATURE_BYTES = 64;
const PUBLIC_KEY_PEM = /^-----BEGIN PUBLIC KEY-----\r?\n[A-Za-z0-9+/=\r\n]+-----END PUBLIC KEY-----$/;
const PRIVATE_KEY_PEM = /-----BEGIN [A-Z ]*PRIVATE KEY-----/;
/** base64 (standard alphabet), padding optional: what `openssl base64 -A` and `base64 -w0` print. */
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

export interface ParsedSigningKey {
  /** First 16 hex digits of SHA-256 over the key's SPKI DER: the `key_id` of OTA commands. */
  keyId: string;
  /** The key in canonical PEM (SPKI), as stored and shown. */
  pem: string;
  key: KeyObject;
}

/**
 * The key id a device can compute from the public key it embeds, so it never needs a table
 * from us to pick the right key: 16 hex digits (64 bits) tell a manufacturer's few keys apart.
 */
export function signingKeyId(key: KeyObject): string {
  return createHash('sha256')
    .update(key.export({ type: 'spki', format: 'der' }))
    .digest('hex')
    .slice(0, 16);
}

/**
 * Parses a PEM SPKI Ed25519 public key, or throws 422 `invalid_signing_key` saying what is
 * wrong. A private key is refused outright, although Node would derive the public half from
 * it: it must never have reached the service, and accepting it would hide that mistake.
 */
export function parseSigningKey(text: string): ParsedSigningKey {
  const pem = text.trim();
  if (PRIVATE_KEY_PEM.test(pem)) {
    throw invalidKey(
      'This is a private key. Keep it offline and send only its public half (openssl pkey -in key.pem -pubout).',
    );
  }
  if (!PUBLIC_KEY_PEM.test(pem)) {
    throw invalidKey(
      'Expected a PEM public key: "-----BEGIN PUBLIC KEY-----" ... "-----END PUBLIC KEY-----" (SubjectPublicKeyInfo).',
    );
  }
  let key: KeyObject;
  try {
    key = createPublicKey({ key: pem, format: 'pem' });
  } catch {
    throw invalidKey('The PEM public key could not be read.');
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw invalidKey(
      `Expected an Ed25519 key (openssl genpkey -algorithm ed25519), got ${key.asymmetricKeyType ?? 'an unknown type'}.`,
    );
  }
  return { keyId: signingKeyId(key), pem: String(key.export({ type: 'spki', format: 'pem' })), key };
}

/** The 64 signature bytes of a base64 text (whitespace ignored), or null when it cannot be one. */
export function decodeSignature(text: string): Buffer | null {
  const compact = text.replace(/\s+/g, '');
  if (!BASE64.test(compact)) return null;
  const bytes = Buffer.from(compact, 'base64');
  // Node's decoder skips what it cannot read; re-encoding tells a real 64-byte value apart.
  if (bytes.length !== SIGNATURE_BYTES || bytes.toString('base64').replace(/=+$/, '') !== compact.replace(/=+$/, ''))
    return null;
  return bytes;
}

/** True when `signature` is the key's Ed25519 signature over the 32 digest bytes (hex `sha256`). */
export function verifyDigestSignature(input: { sha256: string; signature: Buffer; key: KeyObject }): boolean {
  const digest = Buffer.from(input.sha256, 'hex');
  if (digest.length !== 32) return false;
  return verify(null, digest, input.key, input.signature);
}

/**
 * The signature an upload is stored with. With a signing key registered, the upload must carry
 * a valid signature by it: 422 signature_invalid when it is missing, malformed or does not
 * verify. Without one, uploads stay unsigned (null), and a signature is refused rather than
 * dropped: storing the version unsigned would let devices that require signatures fail in the
 * field instead of here. A blank signature counts as none.
 */
export function uploadSignature(input: {
  current: { keyId: string; key: KeyObject } | null;
  given: string | undefined;
  sha256: string;
}): { keyId: string; signature: string } | null {
  const { current } = input;
  const given = input.given?.trim() ? input.given : undefined;
  if (!current) {
    if (given === undefined) return null;
    throw signatureInvalid(
      'No firmware signing key is registered for this account: register its public key (PUT /api/v1/firmware/signing-key) or upload without a signature.',
    );
  }
  if (given === undefined) {
    throw signatureInvalid(
      `Firmware of this account must be signed: send the form field "signature" (base64 Ed25519 signature over the file's SHA-256 digest, key ${current.keyId}).`,
    );
  }
  return verifiedSignature({ current, given, sha256: input.sha256, of: 'this file' });
}

/**
 * The signature attached to a version already stored (one uploaded before the account registered
 * its key, or signed with a key since retired): it must verify with the account's current key
 * over the version's stored digest, which outlives a deleted binary. 422 signature_invalid when
 * no key is registered (nothing to verify against) or it is missing, malformed or does not verify.
 */
export function attachedSignature(input: {
  current: { keyId: string; key: KeyObject } | null;
  given: string;
  sha256: string;
  version: string;
}): { keyId: string; signature: string } {
  const { current } = input;
  if (!current) {
    throw signatureInvalid(
      'No firmware signing key is registered for this account: register its public key first (PUT /api/v1/firmware/signing-key); a signature is checked against it.',
    );
  }
  if (!input.given.trim()) {
    throw signatureInvalid(
      `Send "signature": the base64 Ed25519 signature over the SHA-256 digest of firmware ${input.version} (${input.sha256}), by key ${current.keyId}.`,
    );
  }
  return verifiedSignature({ current, given: input.given, sha256: input.sha256, of: `firmware ${input.version}` });
}

/** Whether two base64 texts are the same signature bytes (whitespace and padding aside). */
export function sameSignature(a: string, b: string): boolean {
  const x = decodeSignature(a);
  const y = decodeSignature(b);
  return x !== null && y !== null && x.equals(y);
}

/**
 * The stable answer when an unsigned version would be sent to devices while the account has a
 * signing key (docs/signed-firmware.md "Sign a version uploaded before the key"): devices that
 * check signatures would refuse it, in the field, one by one. It names each version and how to
 * fix it, so the operator signs it and repeats the request.
 */
export function firmwareUnsigned(input: {
  versions: Array<{ id: string; version: string }>;
  keyId: string;
}): DomainError {
  const names = input.versions.map((v) => v.version);
  const list = names.join(', ');
  return new DomainError(
    'firmware_unsigned',
    `Firmware ${list} ${names.length === 1 ? 'is' : 'are'} not signed, and this account requires signed firmware (key ${input.keyId}): ` +
      `devices that check signatures would refuse ${names.length === 1 ? 'it' : 'them'}, so nothing was scheduled. ` +
      'Attach a signature first (PUT /api/v1/firmware/versions/{id}/signature with {"signature": "<base64 Ed25519 signature over the SHA-256 digest>"}, ' +
      'or the GraphQL mutation attachFirmwareSignature), then repeat the request.',
    {
      details: {
        versions: names,
        firmware_version_ids: input.versions.map((v) => v.id),
        key_id: input.keyId,
      },
    },
  );
}

/** The given base64 signature, checked against `current` over the digest; 422 signature_invalid otherwise. */
function verifiedSignature(input: {
  current: { keyId: string; key: KeyObject };
  given: string;
  sha256: string;
  /** What the digest is of, for the message: "this file", "firmware 1.2.0". */
  of: string;
}): { keyId: string; signature: string } {
  const { current } = input;
  const signature = decodeSignature(input.given);
  if (!signature) throw signatureInvalid('The signature is not a base64 Ed25519 signature (64 bytes).');
  if (!verifyDigestSignature({ sha256: input.sha256, signature, key: current.key })) {
    throw signatureInvalid(
      `The signature does not verify with the account's signing key ${current.keyId} over the SHA-256 digest of ${input.of} (${input.sha256}).`,
    );
  }
  return { keyId: current.keyId, signature: signature.toString('base64') };
}

function signatureInvalid(message: string): DomainError {
  return new DomainError('signature_invalid', message, { errors: [{ field: 'signature', message }] });
}

function invalidKey(message: string): DomainError {
  return new DomainError('invalid_signing_key', message, { errors: [{ field: 'publicKey', message }] });
}
