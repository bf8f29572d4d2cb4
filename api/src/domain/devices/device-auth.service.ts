import type { Knex } from 'knex';
import { timingSafeEqual } from 'node:crypto';
import type { ServiceDeps } from '../service-deps';
import { sha256Hex } from '../shared/secrets';
import { isValidSerial } from './device-types';

/** What the broker keeps about an authenticated connection (nothing secret). */
export interface DeviceSession {
  deviceId: string;
  accountId: string;
  serial: string;
  /** Desired configuration to (re)publish retained on connect when version > 0. */
  desiredConfigVersion: number;
  desiredConfig: Record<string, unknown>;
  /**
   * Set when the session authenticated with a client certificate (SHA-256 of its DER, lowercase
   * hex): revoking that certificate closes this session and no other.
   */
  certificateFingerprint?: string;
}

export type DeviceAuthResult =
  | { ok: true; session: DeviceSession }
  | { ok: false; reason: 'unknown_serial' | 'bad_password' | 'invalid_client' };

interface CredentialRow {
  id: string;
  account_id: string;
  serial: string;
  desired_config_version: number;
  desired_config: Record<string, unknown> | string;
  secret_hash: string;
}

/**
 * Device password check. Device passwords are 256-bit random secrets, stored only as
 * sha256(password), so one SHA-256 and a constant-time compare is enough (scrypt would make a
 * reconnect storm of 10,000 devices cost minutes of CPU). Nothing is cached: every connection
 * reads the current hash, so a rotation or an unclaim refuses the very next attempt.
 * Lookups arriving within 2 ms are answered by one query (a reconnect storm becomes a
 * few `serial = ANY(...)` reads instead of thousands of single-row ones).
 */
export class DeviceAuthService {
  private pending = new Map<string, Array<(row: CredentialRow | null | Error) => void>>();
  private scheduled = false;

  constructor(private readonly deps: Pick<ServiceDeps, 'knex' | 'logger'>) {}

  async authenticate(input: { clientId: string; username: string | undefined; password: Buffer | undefined }): Promise<DeviceAuthResult> {
    const { clientId, username, password } = input;
    // Client id = username = serial; anything else is an identifier we do not issue.
    if (!isValidSerial(clientId) || username !== clientId) return { ok: false, reason: 'invalid_client' };
    const row = await this.lookup(clientId);
    if (!row) return { ok: false, reason: 'unknown_serial' };
    if (!password || password.length === 0 || password.length > 256) return { ok: false, reason: 'bad_password' };
    const actual = Buffer.from(sha256Hex(password), 'hex');
    const expected = Buffer.from(row.secret_hash, 'hex');
    if (actual.length !== expected.length || !timingSafeEqual(actual, expected)) return { ok: false, reason: 'bad_password' };
    return {
      ok: true,
      session: {
        deviceId: row.id,
        accountId: row.account_id,
        serial: row.serial,
        desiredConfigVersion: Number(row.desired_config_version),
        desiredConfig: typeof row.desired_config === 'string' ? (JSON.parse(row.desired_config) as Record<string, unknown>) : row.desired_config,
      },
    };
  }

  private lookup(serial: string): Promise<CredentialRow | null> {
    return new Promise((resolve, reject) => {
      const waiters = this.pending.get(serial);
      const waiter = (r: CredentialRow | null | Error) => (r instanceof Error ? reject(r) : resolve(r));
      if (waiters) waiters.push(waiter);
      else this.pending.set(serial, [waiter]);
      if (!this.scheduled) {
        this.scheduled = true;
        // A 2 ms window: in a reconnect storm connections arrive one per tick, so waiting a
        // moment turns hundreds of single-row reads into one; a lone device barely notices.
        setTimeout(() => void this.runBatch(), 2);
      }
    });
  }

  private async runBatch(): Promise<void> {
    this.scheduled = false;
    const batch = this.pending;
    this.pending = new Map();
    const serials = [...batch.keys()];
    for (let i = 0; i < serials.length; i += 1000) {
      const chunk = serials.slice(i, i + 1000);
      try {
        const rows = await credentialsBySerial(this.deps.knex, chunk);
        const bySerial = new Map(rows.map((r) => [r.serial, r]));
        for (const serial of chunk) for (const w of batch.get(serial)!) w(bySerial.get(serial) ?? null);
      } catch (error) {
        this.deps.logger.error({ err: error }, 'device credential lookup failed');
        for (const serial of chunk) for (const w of batch.get(serial)!) w(error as Error);
      }
    }
  }
}

function credentialsBySerial(knex: Knex, serials: string[]): Promise<CredentialRow[]> {
  return knex('devices as d')
    .join('device_credentials as c', 'c.device_id', 'd.id')
    .whereRaw('d.serial = ANY(?::text[])', [serials])
    .select('d.id', 'd.account_id', 'd.serial', 'd.desired_config_version', 'd.desired_config', 'c.secret_hash');
}
