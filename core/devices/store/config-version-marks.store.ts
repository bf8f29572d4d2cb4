import type { Knex } from 'knex';
import type { Db } from '../../db/db';

/**
 * The highest configuration version each serial was ever given (migration
 * 20261127030000_config_marks_and_ota_reports): a serial's versions only ever go up, across
 * unclaims and claims by other accounts. Keyed by serial alone, holding nothing but the number.
 */

/** The marks of these serials (serials without one are absent). */
export async function selectConfigVersionMarks(db: Db, input: { serials: string[] }): Promise<Map<string, number>> {
  if (input.serials.length === 0) return new Map();
  const rows: Array<{ serial: string; version: number }> = await db('config_version_marks')
    .whereRaw('serial = ANY(?::text[])', [input.serials])
    .select('serial', 'version');
  return new Map(rows.map((r) => [r.serial, r.version]));
}

/** Raises the serial's mark to `version` (never lowers it): an unclaim keeps what its device was given. */
export async function raiseConfigVersionMark(
  trx: Knex.Transaction,
  input: { serial: string; version: number },
): Promise<void> {
  await trx.raw(
    `INSERT INTO config_version_marks (serial, version) VALUES (?, ?)
     ON CONFLICT (serial) DO UPDATE SET version = GREATEST(config_version_marks.version, EXCLUDED.version)`,
    [input.serial, input.version],
  );
}
