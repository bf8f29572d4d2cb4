import type { Knex } from 'knex';
import type { Clock } from '../shared/clock';
import type { Db } from '../db/db';
import { newId } from '../shared/ids';
import { isValidVersion, versionKey } from '../shared/version';
import {
  pathFirmwareById,
  pathFirmwareOf,
  requireSignedFirmware,
  type PathFirmware,
} from '../firmware/firmware-records';
import { planUpgradePath, allowsDirect } from './upgrade-path-rules';
import {
  insertNextHop,
  markNoUpgradePath,
  passedHopsAmong,
  replanQueuedRow,
  startPathOfQueued,
  unplannedSourcesOf,
} from './store/upgrade-paths.store';

// Upgrade paths in the engine's and the deploy's units of work (docs/ota.md "Upgrade paths"):
// planned when targets are recorded, the next hop queued when one succeeds, a queued row
// re-planned at dispatch when its device's version changed. The plan itself is
// upgrade-path-rules.ts (pure).

/** The firmware versions plans of one model are made over, loaded once per model per unit of work. */
class PathVersions {
  private readonly byModel = new Map<string, PathFirmware[]>();
  constructor(private readonly db: Db | Knex.Transaction) {}

  async of(input: { accountId: string; modelId: string }): Promise<PathFirmware[]> {
    const key = `${input.accountId}/${input.modelId}`;
    let found = this.byModel.get(key);
    if (!found) {
      found = await pathFirmwareOf(this.db, input);
      this.byModel.set(key, found);
    }
    return found;
  }
}

/**
 * Plans the deployment's freshly queued rows: those whose target does not allow their device's
 * version start a path (first hop now), those without one are `no_upgrade_path` (cancelled, left
 * alone). Rows whose device reported no version yet are planned at dispatch. A deployment
 * whose targets all allow any version costs one grouped read. Refuses (firmware_unsigned) a
 * path through an unsigned stepping stone when the account signs its firmware.
 */
export async function planQueuedPaths(
  trx: Knex.Transaction,
  clock: Clock,
  input: { deploymentId: string; accountId: string; modelId: string },
): Promise<{ planned: number; noPath: number }> {
  const sources = await unplannedSourcesOf(trx, input.deploymentId);
  const out = { planned: 0, noPath: 0 };
  if (sources.length === 0) return out;
  const versions = await pathFirmwareOf(trx, { accountId: input.accountId, modelId: input.modelId });
  const byId = new Map(versions.map((v) => [v.id, v]));
  const now = clock.now();
  const stones = new Set<string>();
  for (const s of sources) {
    const target = byId.get(s.firmwareVersionId) ?? (await pathFirmwareById(trx, s.firmwareVersionId));
    if (!target || target.upgradeFrom === null || s.fromVersion === null || !isValidVersion(s.fromVersion)) continue;
    const plan = planUpgradePath({ from: s.fromVersion, target, versions });
    if (plan.kind === 'path') {
      for (const h of plan.hops.slice(0, -1)) stones.add(h.id);
      out.planned += await startPathOfQueued(trx, {
        deploymentId: input.deploymentId,
        fromVersion: s.fromVersion,
        final: target,
        hops: plan.hops,
        now,
      });
    } else if (plan.kind === 'no_upgrade_path') {
      out.noPath += await markNoUpgradePath(trx, {
        deploymentId: input.deploymentId,
        fromVersion: s.fromVersion,
        firmwareVersionId: target.id,
        now,
      });
    }
  }
  if (stones.size > 0)
    await requireSignedFirmware(trx, { accountId: input.accountId, firmwareVersionIds: [...stones] });
  return out;
}

/**
 * Of updates that just succeeded, the hops whose path goes on: each gets its next hop queued
 * (a new job of the same deployment), planned from the version reached with the ranges of now.
 * Returns the ids of the passed hops.
 */
export async function continuePaths(trx: Knex.Transaction, clock: Clock, succeededIds: string[]): Promise<Set<string>> {
  const passed = await passedHopsAmong(trx, succeededIds);
  if (passed.length === 0) return new Set();
  const versions = new PathVersions(trx);
  const now = clock.now();
  for (const p of passed) {
    const final = await pathFirmwareById(trx, p.final.id);
    if (!final) continue;
    const all = await versions.of({ accountId: final.accountId, modelId: final.modelId });
    const plan = planUpgradePath({ from: p.targetVersion, target: final, versions: all });
    const hops = plan.kind === 'path' ? plan.hops : [final];
    await insertNextHop(trx, {
      id: newId(),
      passed: p,
      next: hops[0]!,
      hopCount: p.hop + hops.length,
      // A cancelled deployment sends nothing more: the device stays on the stepping stone.
      cancelReason: p.deploymentCancelled
        ? 'deployment cancelled'
        : plan.kind === 'no_upgrade_path'
          ? 'no_upgrade_path'
          : null,
      now,
    });
  }
  return new Set(passed.map((p) => p.id));
}

/** A queued row about to be sent, with what re-planning it needs. */
export interface ReplanCandidate {
  id: string;
  accountId: string;
  /** The version the device reports now (null: not yet). */
  firmware: string | null;
  firmwareVersionId: string;
  targetVersion: string;
  upgradeFrom: string | null;
  finalFirmwareVersionId: string | null;
  hop: number | null;
}

/** Whether the row must not be sent as it is: its target does not allow the device's version. */
export const needsReplan = (c: ReplanCandidate): boolean =>
  c.upgradeFrom !== null &&
  c.firmware !== null &&
  isValidVersion(c.firmware) &&
  versionKey(c.firmware) !== versionKey(c.targetVersion) &&
  !allowsDirect(c, c.firmware);

/**
 * Re-plans queued rows whose target does not allow what their device runs now (a device that
 * reported its version only after the deploy, or changed it since): from that version to the
 * row's final target. They stay queued (or end as `no_upgrade_path`); the caller dispatches
 * them again.
 */
export async function replanQueued(trx: Knex.Transaction, clock: Clock, rows: ReplanCandidate[]): Promise<void> {
  const versions = new PathVersions(trx);
  const now = clock.now();
  for (const r of rows) {
    const final = await pathFirmwareById(trx, r.finalFirmwareVersionId ?? r.firmwareVersionId);
    if (!final || final.accountId !== r.accountId || r.firmware === null) continue;
    const all = await versions.of({ accountId: final.accountId, modelId: final.modelId });
    const plan = planUpgradePath({ from: r.firmware, target: final, versions: all });
    const hops = plan.kind === 'path' ? plan.hops : [final];
    const hop = r.hop ?? 1;
    const chained = plan.kind === 'path' || r.finalFirmwareVersionId !== null;
    await replanQueuedRow(trx, {
      id: r.id,
      fromVersion: r.firmware,
      target: hops[0]!,
      final: chained ? final : null,
      hop: chained ? hop : null,
      hopCount: chained ? hop - 1 + hops.length : null,
      noPath: plan.kind === 'no_upgrade_path',
      now,
    });
  }
}

/** The dry run's `upgrade_paths`: per source version the path and its devices; devices with none. */
export interface UpgradePathsPreview {
  /** Devices the target allows directly (or whose version is not known yet: planned when they report it). */
  direct: number;
  paths: Array<{ fromVersion: string; hops: string[]; devices: number }>;
  noUpgradePath: Array<{ fromVersion: string; devices: number }>;
  noUpgradePathCount: number;
  /** The firmware records used as stepping stones (checked for signatures like the target). */
  steppingStoneIds: string[];
}

/** What the deploy would plan for these devices (grouped by the version they report); writes nothing. */
export async function previewPaths(
  db: Db | Knex.Transaction,
  input: {
    accountId: string;
    modelId: string;
    target: { id: string; version: string };
    sources: Array<{ firmware: string | null; devices: number }>;
  },
): Promise<UpgradePathsPreview> {
  const out: UpgradePathsPreview = {
    direct: 0,
    paths: [],
    noUpgradePath: [],
    noUpgradePathCount: 0,
    steppingStoneIds: [],
  };
  const stones = new Set<string>();
  const versions = await pathFirmwareOf(db, { accountId: input.accountId, modelId: input.modelId });
  const target = versions.find((v) => v.id === input.target.id) ?? { ...input.target, upgradeFrom: null };
  for (const s of input.sources) {
    const plan =
      s.firmware === null || target.upgradeFrom === null
        ? ({ kind: 'direct' } as const)
        : planUpgradePath({ from: s.firmware, target, versions });
    if (plan.kind === 'path') {
      out.paths.push({ fromVersion: s.firmware!, hops: plan.hops.map((h) => h.version), devices: s.devices });
      for (const h of plan.hops.slice(0, -1)) stones.add(h.id);
    } else if (plan.kind === 'no_upgrade_path') {
      out.noUpgradePath.push({ fromVersion: s.firmware!, devices: s.devices });
      out.noUpgradePathCount += s.devices;
    } else out.direct += s.devices;
  }
  out.steppingStoneIds = [...stones];
  out.paths.sort((a, b) => b.devices - a.devices || a.fromVersion.localeCompare(b.fromVersion));
  out.noUpgradePath.sort((a, b) => b.devices - a.devices || a.fromVersion.localeCompare(b.fromVersion));
  return out;
}
