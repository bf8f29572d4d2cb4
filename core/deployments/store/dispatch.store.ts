import type { Knex } from 'knex';
import { sqlList } from '../../shared/sql-list';
import type { DeviceConfig } from '../../devices/device-config';
import type { LocalWindow } from '../../sites/site-schedule';
import { IN_FLIGHT_STATES, type UpdateRef } from '../deployment-types';
import type { Candidate } from '../dispatch-rules';
import type { CommandJob } from '../ota-command-publisher';
import type { Db } from '../../db/db';
import { HOLD_COLUMNS, LOCK_JOIN, toHoldInputs, type HoldRow } from './update-locks.store';
import { preparedRaw } from '../../db/prepared';

/** What the OTA command of a `sent` update needs, and whose it is. */
export type SentCommand = UpdateRef & CommandJob;

interface CommandJobRow {
  id: string;
  device_id: string;
  serial: string;
  target_version: string;
  firmware_version_id: string;
  /** The model the firmware is built for (its name): in the command, so a module can refuse another model's image. */
  model: string;
  sha256: string;
  size: number | string;
  storage_key: string | null;
  signature: string | null;
  signing_key_id: string | null;
}

const toCommandJob = (r: CommandJobRow): CommandJob => ({
  id: r.id,
  deviceId: r.device_id,
  serial: r.serial,
  targetVersion: r.target_version,
  firmwareVersionId: r.firmware_version_id,
  model: r.model,
  sha256: r.sha256,
  // bigint: the driver gives a string.
  size: Number(r.size),
  storageKey: r.storage_key,
  signature: r.signature,
  signingKeyId: r.signing_key_id,
});

interface CandidateRow extends CommandJobRow {
  account_id: string;
  deployment_id: string;
  from_version: string | null;
  firmware_key: string | null;
  connectivity: string;
  desired_config: DeviceConfig | null;
  tags: Record<string, string> | null;
  /** Upgrade paths (upgrade-paths.ts): what the device reports, its target's range, the row's path. */
  device_firmware?: string | null;
  upgrade_from?: string | null;
  final_firmware_version_id?: string | null;
  hop?: number | null;
  site_time_zone?: string | null;
  site_window?: LocalWindow | null;
}

type HeldCandidateRow = CandidateRow & HoldRow;

/**
 * One literal, no spread: `{ ...toCommandJob(r), ... }` with keys set twice cost 15-20 µs a row
 * in V8 (dictionary-mode objects), most of the Node time of a dispatch page of 4,000 rows.
 */
const toCandidate = (r: HeldCandidateRow): Candidate => ({
  id: r.id,
  deviceId: r.device_id,
  serial: r.serial,
  targetVersion: r.target_version,
  firmwareVersionId: r.firmware_version_id,
  model: r.model,
  sha256: r.sha256,
  // bigint: the driver gives a string.
  size: Number(r.size),
  accountId: r.account_id,
  deploymentId: r.deployment_id,
  fromVersion: r.from_version,
  storageKey: r.storage_key,
  signature: r.signature,
  signingKeyId: r.signing_key_id,
  // Before the device's first heartbeat, firmware_key holds the version its claim installs (for
  // comparisons only): the dispatch rules see a key only once `firmware` was reported.
  firmwareKey: r.firmware_key,
  online: r.connectivity === 'online',
  desiredConfig: r.desired_config,
  tags: r.tags,
  site: r.site_time_zone ? { timeZone: r.site_time_zone, window: r.site_window ?? null } : null,
  hold: toHoldInputs(r),
  path: {
    firmware: r.device_firmware ?? null,
    upgradeFrom: r.upgrade_from ?? null,
    finalFirmwareVersionId: r.final_firmware_version_id ?? null,
    hop: r.hop ?? null,
  },
});

/**
 * Outside a dispatch for devices that just became ready, only a device that is online and said
 * what it runs may get a command now (dispatch-rules.ts mayGetCommandNow): the others' rows are
 * neither locked nor read. A sweep of a running deployment to 100,000 offline devices locked and
 * read them all every 5 s (10 pages of 10,000): 42 % of a core with nothing to send, 20 % with
 * this (the service 13 % and 2 %; measured here). A scalar subquery, which PostgreSQL never turns
 * into a join: one probe of the device by key per queued row, whatever the statistics say of how
 * many devices are online (the trap lockDispatchPage's two statements avoid).
 */
const SENDABLE_DEVICE = `(SELECT d.connectivity = 'online' AND d.firmware IS NOT NULL AND d.firmware_key IS NOT NULL
                           FROM devices d WHERE d.id = device_updates.device_id)`;

/** Where a dispatch has got to in a deployment's queued updates: pages follow (batch, id). */
export interface DispatchCursor {
  batch: number;
  id: string;
}

/** Before every queued update (batches count from 0). */
export const DISPATCH_START: DispatchCursor = { batch: -1, id: '00000000-0000-0000-0000-000000000000' };

/**
 * Locks the next page of at most `limit` queued updates of a deployment (after `after`, in the
 * opened batches; only those of `readyDeviceIds` when given) and returns them with what their
 * command and the dispatch rules need (dispatch-rules.ts decides which go now). Null when
 * nothing is left.
 *
 * Two statements, each with one plan whatever the statistics say. Planned as one join, a
 * deployment created after the last ANALYZE (statistics saying no device is online and no
 * update queued) made PostgreSQL loop over the devices and scan the updates for each: 48 s for
 * one page, a 10,000-device campaign sent 41-57 s late (bench/ota.bench.ts with analyzed
 * tables). First the page of queued rows, locked, from the updates alone; then what is needed
 * to send them, by id, filtered by the caller rather than by a predicate the statistics misjudge.
 * Pages follow (batch, id), the order of the index device_updates_deployment_state_batch_id: in
 * id order alone, each page read and sorted every queued update of the deployment left (migration
 * 20261129070000_dispatch_pages_in_batch_order).
 */
export async function lockDispatchPage(
  trx: Knex.Transaction,
  input: {
    deploymentId: string;
    batch: number;
    after: DispatchCursor;
    limit: number;
    readyDeviceIds?: string[];
    /** The devices' configuration (maintenance windows) and tags (tag limit) are read only when a rule needs them: they were most of the bytes of a page. */
    withConfig?: boolean;
    withTags?: boolean;
  },
): Promise<{ candidates: Candidate[]; more: boolean; last: DispatchCursor } | null> {
  const ready = input.readyDeviceIds;
  const limit = Math.max(1, Math.floor(input.limit));
  const locked = (
    await trx.raw<{ rows: Array<{ id: string; batch: number }> }>(
      `SELECT id, batch FROM device_updates
      WHERE deployment_id = ? AND state = 'queued' AND batch <= ? AND (batch, id) > (?::int, ?::uuid)${ready ? ' AND device_id = ANY(?::uuid[])' : ` AND ${SENDABLE_DEVICE}`}
      ORDER BY batch, id LIMIT ${limit}
      FOR UPDATE SKIP LOCKED`,
      [input.deploymentId, input.batch, input.after.batch, input.after.id, ...(ready ? [ready] : [])],
    )
  ).rows;
  if (locked.length === 0) return null;
  // From here on (this transaction only) statements are planned without their values: each looks
  // rows up by key from arrays of up to 10,000 ids, and planned with a page's arrays PostgreSQL
  // judged 4,000 ids among 120,000 devices worth reading and hashing the whole devices table (and
  // device_updates), for each statement: 140-180 ms instead of 45-50 ms by key (EXPLAIN ANALYZE
  // here). Not before the page is locked: that statement's best plan depends on its deployment.
  await trx.raw('SET LOCAL plan_cache_mode = force_generic_plan');
  // Prepared, like the writes of markUpdatesSent: a generic plan probes the devices by key
  // instead of hashing the whole table for a page of thousands of ids.
  const rows = (
    await preparedRaw<{ rows: HeldCandidateRow[] }>(
      trx,
      `SELECT u.id, u.account_id, u.device_id, u.deployment_id, d.serial, u.target_version, u.from_version, u.firmware_version_id,
            CASE WHEN d.firmware IS NULL THEN NULL ELSE d.firmware_key END AS firmware_key, d.connectivity, ${input.withConfig ? 'd.desired_config, s.time_zone AS site_time_zone, s.maintenance_window AS site_window' : 'NULL AS desired_config'}, ${input.withTags ? 'd.tags' : 'NULL AS tags'},
            f.sha256, f.size, f.storage_key, f.signature, f.signing_key_id, m.name AS model, ${HOLD_COLUMNS},
            d.firmware AS device_firmware, f.upgrade_from, u.final_firmware_version_id, u.hop
       FROM device_updates u
       JOIN devices d ON d.id = u.device_id
       JOIN firmware_versions f ON f.id = u.firmware_version_id
       JOIN models m ON m.id = f.model_id
       LEFT JOIN sites s ON s.id = d.site_id
       ${LOCK_JOIN}
      WHERE u.id = ANY(?::uuid[])
      ORDER BY u.id`,
      [locked.map((r) => r.id)],
    )
  ).rows;
  const last = locked[locked.length - 1]!;
  return { candidates: rows.map(toCandidate), more: locked.length === limit, last: { batch: last.batch, id: last.id } };
}

/** In-flight updates of the deployment per value of device tag `tag` (devices without it left out). */
export async function inFlightPerTag(
  trx: Knex.Transaction,
  input: { deploymentId: string; tag: string },
): Promise<Map<string, number>> {
  const counts = (
    await trx.raw<{ rows: Array<{ v: string; n: number }> }>(
      `SELECT d.tags ->> ? AS v, count(*)::int AS n FROM device_updates u JOIN devices d ON d.id = u.device_id
                WHERE u.deployment_id = ? AND u.state IN (${sqlList(IN_FLIGHT_STATES)}) AND d.tags ->> ? IS NOT NULL GROUP BY 1`,
      [input.tag, input.deploymentId, input.tag],
    )
  ).rows;
  return new Map(counts.map((c) => [c.v, c.n]));
}

/**
 * `sent` commands last sent before `before` whose device is online now, connected to the
 * process `nodeId` when given (at most 5,000 a sweep; each process re-sends to its own devices).
 */
export async function staleSentCommands(
  db: Db,
  input: { before: Date; nodeId?: string | undefined },
): Promise<SentCommand[]> {
  const { nodeId } = input;
  const rows = (
    await db.raw<{
      rows: Array<CommandJobRow & { account_id: string; deployment_id: string; from_version: string | null }>;
    }>(
      `SELECT u.id, u.account_id, u.device_id, u.deployment_id, d.serial, u.target_version, u.from_version, u.firmware_version_id, f.sha256, f.size, f.storage_key, f.signature, f.signing_key_id, m.name AS model
       FROM device_updates u JOIN devices d ON d.id = u.device_id JOIN firmware_versions f ON f.id = u.firmware_version_id
       JOIN models m ON m.id = f.model_id
      WHERE u.state = 'sent' AND u.sent_at < ? AND d.connectivity = 'online'${nodeId === undefined ? '' : ' AND d.broker_node = ?'} LIMIT 5000`,
      [input.before, ...(nodeId === undefined ? [] : [nodeId])],
    )
  ).rows;
  return rows.map((r) => ({
    ...toCommandJob(r),
    accountId: r.account_id,
    deploymentId: r.deployment_id,
    fromVersion: r.from_version,
  }));
}

/** The `sent` commands of these devices (any account: the caller checks). */
export async function sentCommandsOfDevices(
  db: Db,
  deviceIds: string[],
): Promise<Array<CommandJob & { accountId: string }>> {
  const rows = (
    await db.raw<{ rows: Array<CommandJobRow & { account_id: string }> }>(
      `SELECT u.id, u.account_id, u.device_id, d.serial, u.target_version, u.firmware_version_id, f.sha256, f.size, f.storage_key, f.signature, f.signing_key_id, m.name AS model
       FROM device_updates u JOIN devices d ON d.id = u.device_id JOIN firmware_versions f ON f.id = u.firmware_version_id
       JOIN models m ON m.id = f.model_id
      WHERE u.device_id = ANY(?::uuid[]) AND u.state = 'sent'`,
      [deviceIds],
    )
  ).rows;
  return rows.map((r) => ({ ...toCommandJob(r), accountId: r.account_id }));
}

/**
 * Counts a re-send on those of these updates still `sent` at this moment, and records the
 * connection each goes out on; returns their ids. `unlessSentOn`: not those already sent on
 * that connection (a re-send to a device that came back must not repeat what its current
 * connection got a moment ago); a null connection (not known here) skips nothing.
 */
export async function markResent(
  db: Db,
  input: { resends: Array<{ id: string; connection: string | null }>; now: Date; unlessSentOn: boolean },
): Promise<Set<string>> {
  const result = await db.raw<{ rows: Array<{ id: string }> }>(
    `UPDATE device_updates u SET sent_at = ?, attempts = u.attempts + 1, sent_connection = v.connection
       FROM unnest(?::uuid[], ?::text[]) AS v(id, connection)
      WHERE u.id = v.id AND u.state = 'sent'
        AND (NOT ?::boolean OR v.connection IS NULL OR u.sent_connection IS DISTINCT FROM v.connection)
      RETURNING u.id`,
    // knex's RawBinding typing does not admit arrays of nullable values; pg serializes them.
    [
      input.now,
      input.resends.map((r) => r.id),
      input.resends.map((r) => r.connection) as unknown as string[],
      input.unlessSentOn,
    ],
  );
  return new Set(result.rows.map((r) => r.id));
}
