import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';

/**
 * The device's side of signed firmware (docs/device-protocol.md "Signed firmware"), written the
 * way a module does it with nothing but its crypto library: the manufacturer's Ed25519 public
 * key is embedded at build time, its key id is computed from it, and an image is installed only
 * when the command's signature over the image's 32-byte SHA-256 digest verifies with that key.
 */
export interface TrustedSigningKey {
  key: KeyObject;
  /** First 16 hex digits of SHA-256 over the key's SubjectPublicKeyInfo DER: the commands' `key_id`. */
  keyId: string;
}

/** The embedded public key (PEM, SubjectPublicKeyInfo); throws with a reason when it is none. */
export function trustSigningKey(pem: string): TrustedSigningKey {
  if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem))
    throw new Error('This is a private key: a device embeds only the public half (openssl pkey -pubout)');
  let key: KeyObject;
  try {
    key = createPublicKey({ key: pem.trim(), format: 'pem' });
  } catch {
    throw new Error('Expected a PEM public key ("-----BEGIN PUBLIC KEY-----")');
  }
  if (key.asymmetricKeyType !== 'ed25519')
    throw new Error(`Expected an Ed25519 key, got ${key.asymmetricKeyType ?? 'an unknown type'}`);
  return { key, keyId: keyIdOf(key) };
}

/** The `key_id` commands name a key by, computed from the key itself: no table is needed. */
export function keyIdOf(key: KeyObject): string {
  return createHash('sha256')
    .update(key.export({ type: 'spki', format: 'der' }))
    .digest('hex')
    .slice(0, 16);
}

/** True when `signature` (base64, 64 bytes) is the key's signature over the hex `sha256` digest. */
export function signatureVerifies(input: { sha256: string; signature: string; key: KeyObject }): boolean {
  const signature = Buffer.from(input.signature.replace(/\s+/g, ''), 'base64');
  const digest = Buffer.from(input.sha256, 'hex');
  if (signature.length !== 64 || digest.length !== 32) return false;
  return verify(null, digest, input.key, signature);
}
