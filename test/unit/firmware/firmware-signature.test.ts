import { describe, expect, it } from 'vitest';
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import {
  decodeSignature,
  parseSigningKey,
  signingKeyId,
  uploadSignature,
  verifyDigestSignature,
} from '#core/firmware/firmware-signature';
import { DomainError } from '#core/shared/errors';

const ed = () => generateKeyPairSync('ed25519');
const current = ed();
const other = ed();
const image = Buffer.from('firmware image 2.0.0');
const sha256 = createHash('sha256').update(image).digest('hex');
/** What the manufacturer's signing step produces: Ed25519 over the 32 digest bytes, base64. */
const signDigest = (key: KeyObject, digestHex = sha256) =>
  sign(null, Buffer.from(digestHex, 'hex'), key).toString('base64');
const keyOf = (pair: { publicKey: KeyObject }) => ({ keyId: signingKeyId(pair.publicKey), key: pair.publicKey });

function codeOf(work: () => unknown): string {
  try {
    work();
    return 'ok';
  } catch (error) {
    if (error instanceof DomainError) return error.code;
    throw error;
  }
}

describe('upload signatures', () => {
  it.each<[string, ReturnType<typeof keyOf> | null, string | undefined, string]>([
    ['no key, no signature: stays unsigned', null, undefined, 'ok'],
    ['no key, a blank signature: stays unsigned', null, '   ', 'ok'],
    ['no key, a signature: refused rather than dropped', null, signDigest(current.privateKey), 'signature_invalid'],
    ['a key, no signature', keyOf(current), undefined, 'signature_invalid'],
    ['a key, a blank signature', keyOf(current), '', 'signature_invalid'],
    ['a key, not base64', keyOf(current), 'not a signature!', 'signature_invalid'],
    ['a key, 63 bytes', keyOf(current), Buffer.alloc(63, 1).toString('base64'), 'signature_invalid'],
    ['a key, signed by another key', keyOf(current), signDigest(other.privateKey), 'signature_invalid'],
    [
      'a key, signed over another file',
      keyOf(current),
      signDigest(current.privateKey, createHash('sha256').update('other').digest('hex')),
      'signature_invalid',
    ],
    ['a key, signed by it', keyOf(current), signDigest(current.privateKey), 'ok'],
    [
      'a key, signed by it, wrapped over lines',
      keyOf(current),
      signDigest(current.privateKey).replace(/(.{40})/g, '$1\n'),
      'ok',
    ],
  ])('%s', (_, key, given, expected) => {
    expect(codeOf(() => uploadSignature({ current: key, given, sha256 }))).toBe(expected);
  });

  it('stores the signature in canonical base64 with the key that verified it', () => {
    const wrapped = signDigest(current.privateKey).replace(/(.{40})/g, '$1\n');
    expect(uploadSignature({ current: keyOf(current), given: wrapped, sha256 })).toEqual({
      keyId: signingKeyId(current.publicKey),
      signature: signDigest(current.privateKey),
    });
    expect(uploadSignature({ current: null, given: undefined, sha256 })).toBeNull();
  });
});

describe('signature bytes', () => {
  const valid = signDigest(current.privateKey);
  it.each([
    [valid, true],
    [valid.replace(/=+$/, ''), true],
    [` ${valid.slice(0, 20)}\n${valid.slice(20)} `, true],
    [valid.slice(0, -4), false],
    [valid.replace(/^./, '*'), false],
    ['', false],
    [Buffer.alloc(65).toString('base64'), false],
  ])('%j decodes: %s', (text, ok) => {
    expect(decodeSignature(text) !== null).toBe(ok);
  });

  it('verifies over the digest, not the image', () => {
    const signature = decodeSignature(valid)!;
    expect(verifyDigestSignature({ sha256, signature, key: current.publicKey })).toBe(true);
    expect(verifyDigestSignature({ sha256: sha256.slice(0, 62), signature, key: current.publicKey })).toBe(false);
    expect(verifyDigestSignature({ sha256, signature, key: other.publicKey })).toBe(false);
  });
});

describe('signing keys', () => {
  const pem = String(current.publicKey.export({ type: 'spki', format: 'pem' }));
  it.each([
    ['an Ed25519 public key', pem, 'ok'],
    ['one with surrounding blanks', `\n  ${pem}  \n`, 'ok'],
    ['a private key', String(current.privateKey.export({ type: 'pkcs8', format: 'pem' })), 'invalid_signing_key'],
    [
      'an RSA public key',
      String(generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' })),
      'invalid_signing_key',
    ],
    ['no PEM', 'ssh-ed25519 AAAA', 'invalid_signing_key'],
    ['a broken PEM body', '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----', 'invalid_signing_key'],
  ])('%s: %s', (_, text, expected) => {
    expect(codeOf(() => parseSigningKey(text))).toBe(expected);
  });

  it('names a key by the first 16 hex digits of SHA-256 over its SPKI DER', () => {
    const der = current.publicKey.export({ type: 'spki', format: 'der' });
    expect(parseSigningKey(pem).keyId).toBe(createHash('sha256').update(der).digest('hex').slice(0, 16));
  });
});
