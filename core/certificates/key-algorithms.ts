import { createPublicKey, type KeyObject } from 'node:crypto';

/**
 * The key types the service signs for and signs with, and how WebCrypto names them. Devices'
 * TLS stacks (mbedTLS, wolfSSL, OpenSSL) all do P-256; Ed25519 is smaller and faster where the
 * module supports it; RSA stays for manufacturers whose CA or secure element only does RSA.
 */
export interface KeyAlgorithm {
  /** What the API shows: `P-256`, `P-384`, `P-521`, `Ed25519`, `RSA-2048`, ... */
  label: string;
  /** WebCrypto parameters to import a private key of this type. */
  importParams: AlgorithmIdentifier | EcKeyImportParams | RsaHashedImportParams;
  /** WebCrypto parameters to sign with it (hash included where the type needs one). */
  signParams: Algorithm | EcdsaParams;
}

const CURVES: Record<string, { label: string; hash: string }> = {
  prime256v1: { label: 'P-256', hash: 'SHA-256' },
  secp384r1: { label: 'P-384', hash: 'SHA-384' },
  secp521r1: { label: 'P-521', hash: 'SHA-512' },
};

/** RSA moduli accepted, in bits: below 2048 is broken; above 8192 makes every handshake slow. */
export const RSA_BITS = { min: 2048, max: 8192 } as const;

/** The algorithm of a node:crypto key (public or private), or null for a type we do not take. */
export function keyAlgorithmOf(key: KeyObject): KeyAlgorithm | null {
  const details = key.asymmetricKeyDetails ?? {};
  switch (key.asymmetricKeyType) {
    case 'ec': {
      const curve = CURVES[details.namedCurve ?? ''];
      if (!curve) return null;
      return {
        label: curve.label,
        importParams: { name: 'ECDSA', namedCurve: curve.label },
        signParams: { name: 'ECDSA', hash: curve.hash },
      };
    }
    case 'ed25519':
      return { label: 'Ed25519', importParams: { name: 'Ed25519' }, signParams: { name: 'Ed25519' } };
    case 'rsa': {
      const bits = details.modulusLength ?? 0;
      if (bits < RSA_BITS.min || bits > RSA_BITS.max) return null;
      return {
        label: `RSA-${bits}`,
        importParams: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
        signParams: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } as Algorithm,
      };
    }
    default:
      return null;
  }
}

/** The algorithm of a DER SubjectPublicKeyInfo, or null (unreadable or not a type we take). */
export function keyAlgorithmOfSpki(spki: ArrayBuffer | Buffer): KeyAlgorithm | null {
  try {
    const der = Buffer.isBuffer(spki) ? spki : Buffer.from(spki);
    return keyAlgorithmOf(createPublicKey({ key: der, format: 'der', type: 'spki' }));
  } catch {
    return null;
  }
}

export const ACCEPTED_KEY_TYPES = `P-256, P-384, P-521, Ed25519 or RSA ${RSA_BITS.min} to ${RSA_BITS.max} bits`;
