import type { Knex } from 'knex';
import type { Db } from '../../db/db';
import { preparedRaw } from '../../db/prepared';
import { sqlList } from '../../shared/sql-list';
import { IN_FLIGHT_STATES } from '../../deployments/deployment-types';

/**
 * The delta cache (migration 20261127122000_firmware_deltas): rows keyed by content (from
 * image sha256, to image sha256, format), shared by every process; and what an update's
 * command offered (`device_updates.delta_id`, `delta_refused`).
 */
export type DeltaStatus = 'building' | 'ready' | 'too_large' | 'failed';

/** Two images of one model of one account, the source a device runs and the target. */
export interface DeltaPair {
  fromSha256: string;
  fromKey: string;
  fromSize: number;
  toSha256: string;
  toKey: string;
  toSize: number;
}

export interface DeltaRow {
  id: string;
  status: DeltaStatus;
  size: number | null;
  sha256: string | null;
  storageKey: string | null;
}

const num = (v: number | string | null): number | null => (v === null ? null : Number(v));

/**
 * The image pairs a deployment's unfinished updates need: each device's running version (a
 * firmware record of the same account and model, with its binary) to its update's target.
 * Devices that never reported a version, or whose version has no binary here, get full images.
 */
export async function pairsOfDeployment(db: Db, deploymentId: string): Promise<DeltaPair[]> {
  const { rows } = await db.raw<{ rows: Array<Record<string, string>> }>(
    `SELECT DISTINCT src.sha256 AS from_sha256, src.storage_key AS from_key, src.size AS from_size,
            f.sha256 AS to_sha256, f.storage_key AS to_key, f.size AS to_size
       FROM device_updates u
       JOIN devices d ON d.id = u.device_id
       JOIN firmware_versions f ON f.id = u.firmware_version_id
       JOIN firmware_versions src ON src.account_id = u.account_id AND src.model_id = f.model_id AND src.version_key = d.firmware_key
      WHERE u.deployment_id = ? AND u.state IN ('queued', ${sqlList(IN_FLIGHT_STATES)})
        AND d.firmware IS NOT NULL AND src.storage_key IS NOT NULL AND f.storage_key IS NOT NULL AND src.sha256 <> f.sha256`,
    [deploymentId],
  );
  return rows.map(toPair);
}

function toPair(r: Record<string, string>): DeltaPair {
  return {
    fromSha256: r.from_sha256!,
    fromKey: r.from_key!,
    fromSize: Number(r.from_size),
    toSha256: r.to_sha256!,
    toKey: r.to_key!,
    toSize: Number(r.to_size),
  };
}

/** Claims the build of a pair: a new row `building` (true), or false when another process has it. */
export async function insertDelta(
  db: Db,
  input: { id: string; pair: DeltaPair; format: string; status: 'building' | 'too_large'; now: Date },
): Promise<boolean> {
  const { pair } = input;
  const { rows } = await db.raw<{ rows: Array<{ id: string }> }>(
    `INSERT INTO firmware_deltas (id, from_sha256, to_sha256, format, status, from_size, to_size, claimed_at, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (from_sha256, to_sha256, format) DO NOTHING RETURNING id`,
    [
      input.id,
      pair.fromSha256,
      pair.toSha256,
      input.format,
      input.status,
      pair.fromSize,
      pair.toSize,
      input.now,
      input.now,
    ],
  );
  return rows.length > 0;
}

/**
 * Takes over a build whose process stopped (still `building`, claimed before `staleBefore`), or
 * one refused as `too_large` under a lower size cap than today's (`fits`); its id, or null.
 */
export async function reclaimBuild(
  db: Db,
  input: { pair: DeltaPair; format: string; staleBefore: Date; now: Date; fits: boolean },
): Promise<string | null> {
  const { rows } = await db.raw<{ rows: Array<{ id: string }> }>(
    `UPDATE firmware_deltas SET claimed_at = ?, status = 'building'
      WHERE from_sha256 = ? AND to_sha256 = ? AND format = ?
        AND ((status = 'building' AND claimed_at < ?) OR (status = 'too_large' AND ?::boolean))
      RETURNING id`,
    [input.now, input.pair.fromSha256, input.pair.toSha256, input.format, input.staleBefore, input.fits],
  );
  return rows[0]?.id ?? null;
}

/** Gives a claimed build back (its process stops before finishing it): the row goes. */
export async function releaseBuild(db: Db, id: string): Promise<void> {
  await db('firmware_deltas').where({ id, status: 'building' }).delete();
}

export async function finishDelta(
  db: Db,
  input: {
    id: string;
    status: 'ready' | 'failed';
    storageKey?: string;
    size?: number;
    sha256?: string;
    buildMs?: number;
    error?: string;
    now: Date;
  },
): Promise<void> {
  await db('firmware_deltas')
    .where({ id: input.id })
    .update({
      status: input.status,
      storage_key: input.storageKey ?? null,
      size: input.size ?? null,
      sha256: input.sha256 ?? null,
      build_ms: input.buildMs ?? null,
      error: input.error?.slice(0, 500) ?? null,
      built_at: input.now,
    });
}

/** The cached rows of these pairs, by `${from}:${to}`. */
export async function deltasOfPairs(
  db: Db | Knex.Transaction,
  input: { pairs: Array<{ fromSha256: string; toSha256: string }>; format: string },
): Promise<Map<string, DeltaRow>> {
  if (input.pairs.length === 0) return new Map();
  const { rows } = await db.raw<{
    rows: Array<{
      id: string;
      from_sha256: string;
      to_sha256: string;
      status: DeltaStatus;
      size: string | null;
      sha256: string | null;
      storage_key: string | null;
    }>;
  }>(
    `SELECT fd.id, fd.from_sha256, fd.to_sha256, fd.status, fd.size, fd.sha256, fd.storage_key
       FROM firmware_deltas fd
       JOIN unnest(?::text[], ?::text[]) AS p(from_sha256, to_sha256)
         ON fd.from_sha256 = p.from_sha256 AND fd.to_sha256 = p.to_sha256
      WHERE fd.format = ?`,
    [input.pairs.map((p) => p.fromSha256), input.pairs.map((p) => p.toSha256), input.format],
  );
  return new Map(
    rows.map((r) => [
      `${r.from_sha256}:${r.to_sha256}`,
      { id: r.id, status: r.status, size: num(r.size), sha256: r.sha256, storageKey: r.storage_key },
    ]),
  );
}

/** What a command of each of these updates could offer: the device's running version, its image pair, the cached delta. */
export interface OfferCandidate {
  updateId: string;
  fromVersion: string;
  pair: DeltaPair;
  delta: DeltaRow | null;
}

/**
 * Updates whose device said (`delta_apply`) it cannot apply a delta are left out.
 *
 * `db` should keep one plan for every value (Database.plannedOnce), as should `recordOffers`'s:
 * each looks updates up by key from an array of a dispatch page's ids (up to 10,000). Planned with
 * the array at hand, PostgreSQL judged a page of 2,000 among 110,000 updates worth a scan of the
 * whole table (39 and 45 ms, against 24 and 7.5 ms by key; EXPLAIN ANALYZE here): a cost per
 * command that grew with the table (bench/ota.bench.ts).
 */
export async function offerCandidates(
  db: Db,
  input: { updateIds: string[]; format: string },
): Promise<OfferCandidate[]> {
  if (input.updateIds.length === 0) return [];
  const { rows } = await preparedRaw<{ rows: Array<Record<string, string>> }>(
    db,
    `SELECT u.id AS update_id, d.firmware AS from_version,
            src.sha256 AS from_sha256, src.storage_key AS from_key, src.size AS from_size,
            f.sha256 AS to_sha256, f.storage_key AS to_key, f.size AS to_size
       FROM device_updates u
       JOIN devices d ON d.id = u.device_id
       JOIN firmware_versions f ON f.id = u.firmware_version_id
       JOIN firmware_versions src ON src.account_id = u.account_id AND src.model_id = f.model_id AND src.version_key = d.firmware_key
      WHERE u.id = ANY(?::uuid[]) AND NOT u.delta_refused AND d.firmware IS NOT NULL
        AND src.storage_key IS NOT NULL AND f.storage_key IS NOT NULL AND src.sha256 <> f.sha256`,
    [input.updateIds],
  );
  const pairs = rows.map(toPair);
  // A deployment's updates share a few pairs: each is looked up once, not once per update.
  const distinct = new Map(pairs.map((p) => [`${p.fromSha256}:${p.toSha256}`, p]));
  const cached = await deltasOfPairs(db, { pairs: [...distinct.values()], format: input.format });
  return rows.map((r, i) => ({
    updateId: r.update_id!,
    fromVersion: r.from_version!,
    pair: pairs[i]!,
    delta: cached.get(`${r.from_sha256}:${r.to_sha256}`) ?? null,
  }));
}

/**
 * Records the delta each update's command offers now (null: the full image only); only rows that
 * change are written. An update that fell back keeps the delta it tried (its bytes count as sent).
 */
export async function recordOffers(db: Db, offers: Array<{ updateId: string; deltaId: string | null }>): Promise<void> {
  if (offers.length === 0) return;
  await preparedRaw(
    db,
    `UPDATE device_updates u SET delta_id = v.delta_id
       FROM unnest(?::uuid[], ?::uuid[]) AS v(id, delta_id)
      WHERE u.id = v.id AND u.delta_id IS DISTINCT FROM v.delta_id AND NOT u.delta_refused`,
    // knex's RawBinding typing does not admit arrays of nullable values; pg serializes them.
    [offers.map((o) => o.updateId), offers.map((o) => o.deltaId) as unknown as string[]],
  );
}

/** The delta an update's command offered, as its download link sees it. */
export interface DeltaDownloadJob {
  id: string;
  deviceId: string;
  state: string;
  deltaId: string | null;
  storageKey: string | null;
  size: number;
  sha256: string;
}

export async function deltaDownloadJobs(db: Db, ids: readonly string[]): Promise<DeltaDownloadJob[]> {
  const { rows } = await db.raw<{
    rows: Array<{
      id: string;
      device_id: string;
      state: string;
      delta_id: string | null;
      storage_key: string | null;
      size: string | null;
      sha256: string | null;
    }>;
  }>(
    `SELECT u.id, u.device_id, u.state, u.delta_id, fd.storage_key, fd.size, fd.sha256
       FROM device_updates u LEFT JOIN firmware_deltas fd ON fd.id = u.delta_id AND fd.status = 'ready' AND NOT u.delta_refused
      WHERE u.id = ANY(?::uuid[])`,
    [[...ids]],
  );
  return rows.map((r) => ({
    id: r.id,
    deviceId: r.device_id,
    state: r.state,
    deltaId: r.delta_id,
    storageKey: r.storage_key,
    size: Number(r.size ?? 0),
    sha256: r.sha256 ?? '',
  }));
}

/** An account's image of one model by version key, for the dry run (null storage key: deleted). */
export interface ImageRef {
  versionKey: string;
  sha256: string;
  size: number;
  storageKey: string | null;
}

export async function imagesOf(
  db: Db,
  input: { accountId: string; modelId: string; versionKeys: string[]; firmwareId: string },
): Promise<{ target: ImageRef | null; sources: Map<string, ImageRef> }> {
  const { rows } = await db.raw<{
    rows: Array<{ id: string; version_key: string; sha256: string; size: string; storage_key: string | null }>;
  }>(
    `SELECT id, version_key, sha256, size, storage_key FROM firmware_versions
      WHERE account_id = ? AND model_id = ? AND (version_key = ANY(?::text[]) OR id = ?)`,
    [input.accountId, input.modelId, input.versionKeys, input.firmwareId],
  );
  const ref = (r: (typeof rows)[number]): ImageRef => ({
    versionKey: r.version_key,
    sha256: r.sha256,
    size: Number(r.size),
    storageKey: r.storage_key,
  });
  const target = rows.find((r) => r.id === input.firmwareId);
  return {
    target: target ? ref(target) : null,
    sources: new Map(rows.filter((r) => r.id !== input.firmwareId).map((r) => [r.version_key, ref(r)])),
  };
}
