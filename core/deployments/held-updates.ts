import type { Knex } from 'knex';
import type { Db } from '../db/db';
import { holdOf, type HoldReason } from './update-locks';
import { queuedUpdatesMaybeHeld, targetsMaybeHeld, toHoldInputs, type HoldRow } from './store/update-locks.store';

/** Held updates of a deployment (or of a dry run's targets): how many, per reason, and some serials. */
export interface HeldSummary {
  count: number;
  /** Per reason, most frequent first (then by name). */
  reasons: Array<{ reason: HoldReason; count: number }>;
  /** The first serials held (by serial), at most HELD_SAMPLE. */
  serials: string[];
}

/** Serials a held summary lists. */
export const HELD_SAMPLE = 20;

export const noneHeld = (): HeldSummary => ({ count: 0, reasons: [], serials: [] });

function summarize(rows: Array<HoldRow & { serial: string }>, now: Date): HeldSummary {
  const held = noneHeld();
  const perReason = new Map<HoldReason, number>();
  for (const r of rows) {
    const hold = holdOf(toHoldInputs(r), now);
    if (!hold) continue;
    held.count += 1;
    perReason.set(hold.reason, (perReason.get(hold.reason) ?? 0) + 1);
    if (held.serials.length < HELD_SAMPLE) held.serials.push(r.serial);
  }
  held.reasons = [...perReason]
    .map(([reason, count]) => ({ reason, count }))
    .sort((x, y) => y.count - x.count || x.reason.localeCompare(y.reason));
  return held;
}

/** Per deployment (all of the account's): its queued updates held now by a device lock or a site freeze. */
export async function heldOfDeployments(
  db: Db,
  input: { accountId: string; deploymentIds: string[]; now: Date },
): Promise<Map<string, HeldSummary>> {
  const map = new Map(input.deploymentIds.map((id) => [id, noneHeld()]));
  const rows = await queuedUpdatesMaybeHeld(db, input);
  const byDeployment = new Map<string, typeof rows>();
  for (const r of rows) byDeployment.set(r.deployment_id, [...(byDeployment.get(r.deployment_id) ?? []), r]);
  for (const [id, list] of byDeployment) map.set(id, summarize(list, input.now));
  return map;
}

/** A dry run: the devices it would target that are held now. */
export async function heldAmongTargets(
  db: Db | Knex.Transaction,
  input: { where: { sql: string; bindings: Knex.Value[] }; now: Date },
): Promise<HeldSummary> {
  return summarize(await targetsMaybeHeld(db, input), input.now);
}
