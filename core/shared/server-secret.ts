import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createSecretKey,
  hkdfSync,
  randomBytes,
  type KeyObject,
} from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The server's own secret: 32 random bytes that never leave the service. Purpose keys are
 * derived from it with HKDF (webhook secret encryption, firmware download link signing), so
 * one leaked purpose key does not reveal the others.
 *
 * Where it lives (first match wins):
 *  1. env `FLEET_SECRET`: 64 hex characters, or 43/44 base64 characters of 32 bytes, or any
 *     passphrase of at least 32 characters (hashed to 32 bytes). Every process of a cluster
 *     must use the same value: set it when DATABASE_URL is shared by several machines.
 *  2. `DATA_DIR/server-secret`: created on first start (base64, file mode 0600).
 * Losing it makes stored webhook secrets undecryptable (endpoints must be re-created) and
 * invalidates outstanding download links; nothing else.
 */
export class ServerSecret {
  private readonly derived = new Map<string, KeyObject>();

  constructor(private readonly master: Buffer) {
    if (master.length !== 32) throw new Error('The server secret must be 32 bytes.');
  }

  /**
   * A 32-byte key for one purpose, e.g. `webhook-secrets` or `firmware-downloads`. A KeyObject,
   * not a Buffer: on Node 24 every createHmac or createCipheriv given a Buffer key spent 13-15 µs
   * more (16-17 µs against 2.5-4 µs, measured here), a sixteenth of an OTA command's service CPU
   * in bench/ota.bench.ts's profile; on Node 26 a KeyObject is still the faster of the two.
   */
  key(purpose: string): KeyObject {
    let key = this.derived.get(purpose);
    if (!key) {
      key = createSecretKey(Buffer.from(hkdfSync('sha256', this.master, Buffer.alloc(0), `fleet:${purpose}`, 32)));
      this.derived.set(purpose, key);
    }
    return key;
  }

  /** AES-256-GCM under the purpose key: `v1.<iv>.<tag>.<ciphertext>` (base64url parts). */
  encrypt(purpose: string, plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key(purpose), iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), body.toString('base64url')].join(
      '.',
    );
  }

  /** Throws when the value was not produced by `encrypt` with this secret and purpose. */
  decrypt(purpose: string, sealed: string): string {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || body === undefined) throw new Error('unreadable sealed value');
    const decipher = createDecipheriv('aes-256-gcm', this.key(purpose), Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
  }
}

export function parseSecretValue(value: string): Buffer {
  const trimmed = value.trim();
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)) {
    const bytes = Buffer.from(trimmed, trimmed.includes('-') || trimmed.includes('_') ? 'base64url' : 'base64');
    if (bytes.length === 32) return bytes;
  }
  if (trimmed.length >= 32) return createHash('sha256').update(trimmed, 'utf8').digest();
  throw new Error(
    'FLEET_SECRET must be 64 hex characters, 32 bytes in base64, or a passphrase of at least 32 characters.',
  );
}

/** Loads (or on first start creates) the server secret; see the class comment for where it lives. */
export function loadServerSecret(options: { dataDir: string; env?: NodeJS.ProcessEnv }): ServerSecret {
  const fromEnv = (options.env ?? process.env).FLEET_SECRET;
  if (fromEnv) return new ServerSecret(parseSecretValue(fromEnv));
  const file = path.join(options.dataDir, 'server-secret');
  try {
    return new ServerSecret(parseSecretValue(readFileSync(file, 'utf8')));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  mkdirSync(options.dataDir, { recursive: true });
  const secret = randomBytes(32);
  try {
    // `wx`: if another process created it in the meantime, use theirs instead of overwriting.
    writeFileSync(file, secret.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
    return new ServerSecret(secret);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return new ServerSecret(parseSecretValue(readFileSync(file, 'utf8')));
  }
}
