import type { Actor } from '../shared/actor';
import { requireAdmin } from '../shared/actor';
import { DomainError, notFound } from '../shared/errors';
import { appendEvents } from '../events/outbox';
import type { ServiceDeps } from '../service-deps';
import { evaluateHealth, HEALTH_STATES, type HealthReason, type HealthState } from './health-rules';
import { HealthThresholdOverrides, thresholdsFor, type HealthThresholds } from './health-thresholds';
import { FIXTURE_SIGNALS, isConnectionSignal, per1000, type FixtureSignal, type GroupExposure } from './fixture-gate';
import { selectAccountsWithLuminaires, selectHealthInputs, type HealthInputRow } from './store/health-inputs.store';
import {
  countByState,
  saveVerdicts,
  selectDeviceHealths,
  selectMaintenance,
  type MaintenanceRow,
} from './store/device-health.store';
import {
  selectDeploymentConnections,
  selectDeploymentGroups,
  selectVersionConnections,
  selectVersionRates,
  EMPTY_EXPOSURE,
  type ConnectionRow,
  type ExposureRow,
} from './store/fixture-rates.store';
import { selectModelThresholds, updateModelThresholds, selectDeviceIdOf } from './store/model-thresholds.store';

const DAY_MS = 86_400_000;
const num = (v: string | number | null | undefined): number => (v === null || v === undefined ? 0 : Number(v));
const numOrNull = (v: string | number | null | undefined): number | null =>
  v === null || v === undefined ? null : Number(v);

/** Counts of one group as the gate's signals: the luminaire roll-ups', and the connection days' (reboots, reconnects). */
export function signalCounts(row: ExposureRow, connections: ConnectionRow | null): Record<FixtureSignal, number> {
  return {
    thermal_derating: num(row.gear_thermal_derating),
    thermal_shutdown: num(row.gear_thermal_shutdown),
    supply_faults: num(row.supply_undervoltage) + num(row.supply_overvoltage),
    source_failures: num(row.source_failures),
    unexpected_reboots: num(connections?.unexpected_reboots),
    reconnects: num(connections?.reconnects),
  };
}

export interface VersionRates {
  model: string;
  firmware: string | null;
  /** Devices with luminaire readings or heard on the version. */
  devices: number;
  /** Device-days with luminaire readings: the exposure of the luminaire signals. */
  deviceDays: number;
  /** Device-days the devices were heard (connected or reporting): the exposure of unexpected reboots and reconnects. */
  connectedDeviceDays: number;
  /** Events per 1,000 device-days of the signal's exposure; null where that exposure is zero (nothing measured). */
  per1000DeviceDays: Record<FixtureSignal, number | null>;
  events: Record<FixtureSignal, number | null>;
}

const round2 = (n: number): number => Math.round(n * 100) / 100;

/** One version's rates from its luminaire roll-ups and its connection days (either may be missing). */
export function toVersionRates(input: {
  model: string;
  firmware: string | null;
  /** Daily roll-ups: a row is a device-day. */
  luminaire: ExposureRow | null;
  connections: ConnectionRow | null;
}): VersionRates {
  const deviceDays = num(input.luminaire?.rows);
  const connectedDeviceDays = num(input.connections?.days);
  const counts = signalCounts(input.luminaire ?? EMPTY_EXPOSURE, input.connections);
  const exposure = (s: FixtureSignal): number => (isConnectionSignal(s) ? connectedDeviceDays : deviceDays);
  return {
    model: input.model,
    firmware: input.firmware,
    devices: Math.max(num(input.luminaire?.devices), num(input.connections?.devices)),
    deviceDays: round2(deviceDays),
    connectedDeviceDays,
    events: Object.fromEntries(FIXTURE_SIGNALS.map((s) => [s, exposure(s) > 0 ? counts[s] : null])) as Record<
      FixtureSignal,
      number | null
    >,
    per1000DeviceDays: Object.fromEntries(
      FIXTURE_SIGNALS.map((s) => [s, exposure(s) > 0 ? per1000(counts[s], exposure(s)) : null]),
    ) as Record<FixtureSignal, number | null>,
  };
}

/** A device's verdict as the APIs show it. */
export interface DeviceHealthView {
  state: HealthState;
  reasons: HealthReason[];
  urgency: number;
  changedAt: string;
  evaluatedAt: string;
}

export interface MaintenanceItem {
  serial: string;
  name: string;
  model: string;
  firmware: string | null;
  tags: Record<string, string>;
  site: { id: string; name: string | null } | null;
  state: HealthState;
  reasons: HealthReason[];
  urgency: number;
  changedAt: string;
  evaluatedAt: string;
}

const toItem = (r: MaintenanceRow): MaintenanceItem => ({
  serial: r.serial,
  name: r.name,
  model: r.model,
  firmware: r.firmware,
  tags: r.tags,
  site: r.site_id ? { id: r.site_id, name: r.site_name } : null,
  state: r.state,
  reasons: r.reasons,
  urgency: r.urgency,
  changedAt: new Date(r.changed_at).toISOString(),
  evaluatedAt: new Date(r.evaluated_at).toISOString(),
});

/**
 * Fixture health (docs/fixture-health.md): the health pass judges every device with luminaire
 * data by the rules of health-rules.ts with its model's thresholds, stores the verdicts and
 * publishes `device.health_changed` when a device's state changes; the maintenance list, the
 * fleet's counts per state and the per-version rates read what it stored and the roll-ups.
 */
export class HealthService {
  constructor(private readonly deps: ServiceDeps) {}

  /** One pass over every account (the health worker runs it every few minutes). */
  async evaluateAll(): Promise<number> {
    let changed = 0;
    for (const accountId of await selectAccountsWithLuminaires(this.deps.knex))
      changed += await this.evaluateAccount({ accountId });
    return changed;
  }

  /** Judges the account's devices (or the listed ones); answers how many changed state. */
  async evaluateAccount(input: { accountId: string; deviceIds?: string[] }): Promise<number> {
    const now = this.deps.clock.now();
    // The longest window any model asks for: each device is then judged over its own model's window.
    const rows = await selectHealthInputs(this.deps.knex, {
      accountId: input.accountId,
      since: new Date(now.getTime() - 90 * DAY_MS),
      ...(input.deviceIds ? { deviceIds: input.deviceIds } : {}),
    });
    const windowed = await this.withModelWindows(rows, input.accountId, now);
    const verdicts = windowed.map(({ row, thresholds }) => {
      const v = evaluateHealth(
        {
          operatingHours: row.lifetime_burn_s === null ? null : num(row.lifetime_burn_s) / 3600,
          ratedLifeH: numOrNull(row.rated_life_h),
          window: {
            days: num(row.days),
            thermalDerating: num(row.gear_thermal_derating),
            thermalShutdown: num(row.gear_thermal_shutdown),
            supplyUndervoltage: num(row.supply_undervoltage),
            supplyOvervoltage: num(row.supply_overvoltage),
            sourceFailures: num(row.source_failures),
            gearTempMaxC: numOrNull(row.gear_temp_max),
          },
          sourceFailureCounter:
            row.source_failure_segment === null
              ? null
              : { segment: num(row.source_failure_segment), value: num(row.source_failure_value) },
          failedMark: row.failed_mark,
        },
        thresholds,
      );
      return { row, v };
    });
    return this.deps.transaction(async (trx) => {
      const changes = await saveVerdicts(trx, {
        now,
        rows: verdicts.map(({ row, v }) => ({
          deviceId: row.device_id,
          accountId: row.account_id,
          state: v.state,
          reasons: v.reasons,
          urgency: v.urgency,
          failedMark: v.failedMark ? { ...v.failedMark, at: v.failedMark.at ?? now.toISOString() } : null,
        })),
      });
      const byId = new Map(verdicts.map((x) => [x.row.device_id, x]));
      await appendEvents(
        trx,
        this.deps.clock,
        changes.map((c) => {
          const x = byId.get(c.deviceId)!;
          return {
            accountId: input.accountId,
            type: 'device.health_changed' as const,
            subject: x.row.serial,
            data: {
              serial: x.row.serial,
              device_id: c.deviceId,
              model: x.row.model,
              previous: c.previous,
              state: c.state,
              reasons: x.v.reasons,
            },
          };
        }),
      );
      return changes.length;
    });
  }

  /** Rows re-read over each model's own window when it is not the 90-day maximum (rare: one query per such model). */
  private async withModelWindows(rows: HealthInputRow[], accountId: string, now: Date) {
    const models = await selectModelThresholds(this.deps.knex, { accountId });
    const out: Array<{ row: HealthInputRow; thresholds: HealthThresholds }> = [];
    const byWindow = new Map<number, HealthInputRow[]>();
    for (const row of rows) {
      const t = thresholdsFor(models.get(row.model) ?? row.health_thresholds);
      byWindow.set(t.window_days, [...(byWindow.get(t.window_days) ?? []), row]);
    }
    for (const [days, group] of byWindow) {
      const reread = await selectHealthInputs(this.deps.knex, {
        accountId,
        since: new Date(now.getTime() - days * DAY_MS),
        deviceIds: group.map((r) => r.device_id),
      });
      for (const row of reread) out.push({ row, thresholds: thresholdsFor(row.health_thresholds) });
    }
    return out;
  }

  async maintenance(
    actor: Actor,
    input: { model?: string; tag?: { key: string; value: string }; siteId?: string; limit?: number },
  ): Promise<MaintenanceItem[]> {
    const rows = await selectMaintenance(this.deps.knex, {
      ...input,
      accountId: actor.accountId,
      limit: input.limit ?? 1000,
    });
    return rows.map(toItem);
  }

  async countsByState(actor: Actor): Promise<Record<HealthState, number>> {
    const counts = await countByState(this.deps.knex, { accountId: actor.accountId });
    return Object.fromEntries(HEALTH_STATES.map((s) => [s, counts[s] ?? 0])) as Record<HealthState, number>;
  }

  async deviceHealth(actor: Actor, input: { serial: string }): Promise<DeviceHealthView | null> {
    const deviceId = await selectDeviceIdOf(this.deps.knex, { accountId: actor.accountId, serial: input.serial });
    if (!deviceId) throw notFound('Device');
    return (await this.healthOf(actor, { deviceIds: [deviceId] })).get(deviceId) ?? null;
  }

  /** The verdicts of devices of the caller's account, by device id (absent: never judged, or not the caller's). */
  async healthOf(actor: Actor, input: { deviceIds: readonly string[] }): Promise<Map<string, DeviceHealthView>> {
    const rows = await selectDeviceHealths(this.deps.knex, { accountId: actor.accountId, deviceIds: input.deviceIds });
    return new Map(
      rows.map((h) => [
        h.device_id,
        {
          state: h.state,
          reasons: h.reasons,
          urgency: h.urgency,
          changedAt: new Date(h.changed_at).toISOString(),
          evaluatedAt: new Date(h.evaluated_at).toISOString(),
        },
      ]),
    );
  }

  /** Rates per firmware version and model over [from, to) (default: the last 30 days). */
  async versionRates(actor: Actor, input: { from?: Date; to?: Date; model?: string }): Promise<VersionRates[]> {
    const to = input.to ?? this.deps.clock.now();
    const from = input.from ?? new Date(to.getTime() - 30 * DAY_MS);
    if (from >= to) throw new DomainError('validation_failed', '`from` must be before `to`.');
    const query = {
      accountId: actor.accountId,
      from,
      to,
      ...(input.model !== undefined ? { model: input.model } : {}),
    };
    const [luminaire, connections] = await Promise.all([
      selectVersionRates(this.deps.knex, query),
      selectVersionConnections(this.deps.knex, query),
    ]);
    // One row per model and version seen in either source, in that order.
    const key = (r: { model: string; firmware: string | null }): string => JSON.stringify([r.model, r.firmware ?? '']);
    const byKey = new Map<string, { model: string; firmware: string | null; l?: ExposureRow; c?: ConnectionRow }>();
    for (const r of luminaire) byKey.set(key(r), { model: r.model, firmware: r.firmware, l: r });
    for (const r of connections) {
      const found = byKey.get(key(r));
      if (found) found.c = r;
      else byKey.set(key(r), { model: r.model, firmware: r.firmware, c: r });
    }
    return [...byKey.values()]
      .sort((a, b) => a.model.localeCompare(b.model) || (a.firmware ?? '').localeCompare(b.firmware ?? ''))
      .map((r) =>
        toVersionRates({
          model: r.model,
          firmware: r.firmware,
          luminaire: r.l ?? null,
          connections: r.c ?? null,
        }),
      );
  }

  /**
   * Canary and control of a deployment from the roll-ups (store/fixture-rates.store.ts says who is
   * in which group); the baseline is the model on other versions in the `baselineDays` before it started.
   */
  async deploymentGroups(input: {
    accountId: string;
    deploymentId: string;
    model: string;
    target: string;
    since: Date;
    baselineDays: number;
  }): Promise<DeploymentGroups> {
    const query = { ...input, baselineFrom: new Date(input.since.getTime() - input.baselineDays * DAY_MS) };
    const [g, c] = await Promise.all([
      selectDeploymentGroups(this.deps.knex, query),
      selectDeploymentConnections(this.deps.knex, query),
    ]);
    const exposure = (row: ExposureRow, rowsPerDay: number, connections: ConnectionRow): GroupExposure => ({
      devices: Math.max(num(row.devices), num(connections.devices)),
      deviceDays: num(row.rows) / rowsPerDay,
      connectedDeviceDays: num(connections.days),
      counts: signalCounts(row, connections),
    });
    return {
      updated: exposure(g.updated, 24, c.updated),
      control: exposure(g.control, 24, c.control),
      baseline: exposure(g.baseline, 1, c.baseline),
    };
  }

  /** A model's thresholds: the defaults with its overrides, and the overrides alone. */
  async modelThresholds(actor: Actor, input: { model: string }) {
    const models = await selectModelThresholds(this.deps.knex, { accountId: actor.accountId });
    if (!models.has(input.model)) throw notFound('Model');
    const overrides = models.get(input.model) ?? {};
    return { model: input.model, overrides, thresholds: thresholdsFor(overrides) };
  }

  async setModelThresholds(actor: Actor, input: { model: string; overrides: unknown }) {
    requireAdmin(actor);
    const parsed = HealthThresholdOverrides.safeParse(input.overrides);
    if (!parsed.success)
      throw new DomainError(
        'validation_failed',
        parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '),
      );
    const found = await updateModelThresholds(this.deps.knex, {
      accountId: actor.accountId,
      model: input.model,
      overrides: parsed.data,
    });
    if (!found) throw notFound('Model');
    await this.evaluateAccount({ accountId: actor.accountId });
    return this.modelThresholds(actor, { model: input.model });
  }
}

/** A deployment's groups for the gate (HealthService.deploymentGroups). */
export interface DeploymentGroups {
  updated: GroupExposure;
  control: GroupExposure;
  baseline: GroupExposure;
}
