import type { DeviceConfig } from '../devices/device-config';
import { versionKey } from '../shared/version';
import { ownValue } from '../shared/user-keyed';
import type { Rollout, UpdateRef } from './deployment-types';
import { insideMaintenanceWindow, type SiteWindow } from './maintenance-window';
import type { CommandJob } from './ota-command-publisher';
import { holdOf, type HoldInputs } from './update-locks';

/** A queued update with what its command and the dispatch rules need. */
export interface Candidate extends UpdateRef, CommandJob {
  storageKey: string | null;
  signature: string | null;
  signingKeyId: string | null;
  /** The reported firmware's key; null until the device reported one. */
  firmwareKey: string | null;
  /** The device is connected now. */
  online: boolean;
  /** Read only when the deployment respects maintenance windows (null otherwise). */
  desiredConfig: DeviceConfig | null;
  /** The device's site (zone and window), read with `desiredConfig`; null without a site. */
  site?: SiteWindow | null;
  /** Read only when the deployment has a tag limit (null otherwise). */
  tags: Record<string, string> | null;
  /** The device's lock and its site's freezes: a held update is not sent (update-locks.ts). */
  hold?: HoldInputs | null;
  /** Upgrade paths: a row whose target does not allow the device's version is re-planned, not sent (upgrade-paths.ts). */
  path?: {
    firmware: string | null;
    upgradeFrom: string | null;
    finalFirmwareVersionId: string | null;
    hop: number | null;
  };
}

/**
 * Whether a device may get its command at all now: it is connected (or is one of the devices
 * that just became ready, `readyGiven`) and said what it runs. Until its first heartbeat says
 * so, a device is not sent anything: it may already run the target (claimed on it, or
 * installed over USB). The heartbeat dispatches.
 */
export function mayGetCommandNow(c: Pick<Candidate, 'firmwareKey' | 'online'>, readyGiven: boolean): boolean {
  return c.firmwareKey !== null && (readyGiven || c.online);
}

export interface DispatchSelection<C> {
  /** Already on the target version: completed without a command. */
  already: C[];
  /** Their version has no binary (data written around the API): they wait, and the log says why. */
  noFile: C[];
  /** Sent now. */
  send: C[];
}

/**
 * Which of the candidates (that may get a command now) are sent now, in their order: not those
 * already on the target, nor those without a binary, nor those outside their maintenance window
 * (their own, else their site's) when the deployment respects windows, nor those over the tag limit (at most `max` devices with
 * the same value of the tag in flight; devices without the tag are not limited). The others
 * stay queued.
 */
export function selectForDispatch<
  C extends Pick<
    Candidate,
    'firmwareKey' | 'targetVersion' | 'storageKey' | 'desiredConfig' | 'tags' | 'site' | 'hold'
  >,
>(
  candidates: readonly C[],
  rules: {
    now: Date;
    respectMaintenanceWindow: boolean;
    tagLimit?: Rollout['max_concurrent_per_tag'];
    inFlightPerTag?: ReadonlyMap<string, number>;
  },
): DispatchSelection<C> {
  const selection: DispatchSelection<C> = { already: [], noFile: [], send: [] };
  const inFlight = new Map(rules.inFlightPerTag ?? []);
  const { tagLimit } = rules;
  for (const c of candidates) {
    if (c.firmwareKey !== null && c.firmwareKey === versionKey(c.targetVersion)) {
      selection.already.push(c);
      continue;
    }
    // The API refuses to delete a binary while updates target it.
    if (!c.storageKey) {
      selection.noFile.push(c);
      continue;
    }
    // Held (device lock, site freeze): stays queued, without a deadline; the sweep sends it once the hold ends.
    if (c.hold && holdOf(c.hold, rules.now)) continue;
    if (rules.respectMaintenanceWindow && !insideMaintenanceWindow(rules.now, c.desiredConfig, c.site)) continue;
    if (tagLimit) {
      // The tag name is the client's: `constructor` is a tag a device may lack.
      const value = ownValue(c.tags, tagLimit.tag);
      if (value !== undefined) {
        const n = inFlight.get(value) ?? 0;
        if (n >= tagLimit.max) continue;
        inFlight.set(value, n + 1);
      }
    }
    selection.send.push(c);
  }
  return selection;
}
