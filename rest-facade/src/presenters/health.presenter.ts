import type { MaintenanceItem, VersionRates } from '#core/health/health.service';
import type { GateDecision, RecordedGroupSize, RecordedSignalCount } from '#core/health/fixture-gate';
import type { FixtureGateView } from '#core/deployments/fixture-gate.service';
import type { WarrantyReport } from '#core/health/warranty';

export const presentMaintenanceItem = (i: MaintenanceItem) => ({
  serial: i.serial,
  name: i.name,
  model: i.model,
  firmware: i.firmware,
  tags: i.tags,
  site: i.site,
  state: i.state,
  reasons: i.reasons,
  urgency: i.urgency,
  changed_at: i.changedAt,
  evaluated_at: i.evaluatedAt,
});

const csvCell = (v: string | number | null | undefined): string => {
  const s = v === null || v === undefined ? '' : String(v);
  // RFC 4180 quoting; a leading = + - @ is prefixed so a spreadsheet does not run it as a formula (OWASP CSV injection).
  const safe = /^[=+\-@\t\r]/.test(s) ? `'${s}` : s;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
};

/** The maintenance list as CSV (one device a line, reasons joined with " | "). */
export function maintenanceCsv(items: MaintenanceItem[]): string {
  const header = ['serial', 'name', 'model', 'firmware', 'site', 'state', 'urgency', 'reasons', 'changed_at', 'tags'];
  const lines = items.map((i) =>
    [
      i.serial,
      i.name,
      i.model,
      i.firmware,
      i.site?.name ?? i.site?.id ?? '',
      i.state,
      i.urgency,
      i.reasons.map((r) => r.text).join(' | '),
      i.changedAt,
      Object.entries(i.tags)
        .map(([k, v]) => `${k}=${v}`)
        .join(';'),
    ]
      .map(csvCell)
      .join(','),
  );
  return [header.join(','), ...lines].join('\r\n') + '\r\n';
}

export const presentVersionRates = (v: VersionRates) => ({
  model: v.model,
  firmware: v.firmware,
  devices: v.devices,
  device_days: v.deviceDays,
  connected_device_days: v.connectedDeviceDays,
  events: v.events,
  per_1000_device_days: v.per1000DeviceDays,
});

// Decisions recorded before reboots and reconnects were measured lack their exposures: null.
const presentGroup = (g: RecordedGroupSize) => ({
  devices: g.devices,
  device_days: g.deviceDays,
  connected_device_days: g.connectedDeviceDays ?? null,
});
const presentCount = (c: RecordedSignalCount) => ({
  events: c.events,
  device_days: c.deviceDays ?? null,
  per_1000_device_days: c.per1000DeviceDays,
});

export const presentGateDecision = (d: GateDecision) => ({
  state: d.state,
  compared_with: d.comparedWith,
  updated: presentGroup(d.updated),
  control: d.control ? presentGroup(d.control) : null,
  signals: d.signals.map((s) => ({
    signal: s.signal,
    updated: presentCount(s.updated),
    control: presentCount(s.control),
    ratio: s.ratio,
    ratio_lower_bound: s.ratioLowerBound,
    p_value: s.pValue,
    verdict: s.verdict,
  })),
  summary: d.summary,
});

export const presentFixtureGate = (v: FixtureGateView) => ({
  deployment_id: v.deploymentId,
  gated: v.gated,
  current: presentGateDecision(v.current),
  recorded: v.recorded
    ? {
        decision: presentGateDecision(v.recorded.decision),
        evaluated_at: v.recorded.evaluatedAt,
        paused_at: v.recorded.pausedAt,
      }
    : null,
});

export const presentWarrantyReport = (r: WarrantyReport) => ({
  serial: r.serial,
  model: r.model,
  claim_date: r.claimDate,
  claims: r.claims.map((c) => ({ claimed_at: c.claimedAt, unclaimed_at: c.unclaimedAt })),
  generated_at: r.generatedAt,
  operating_hours: r.operatingHours,
  lifetime_energy_kwh: r.lifetimeEnergyKwh,
  firmware_history: r.firmwareHistory,
  fault_counters: r.faultCounters.map((m) => ({
    month: m.month,
    days: m.days,
    energy_kwh: m.energyKwh,
    thermal_derating: m.thermalDerating,
    thermal_shutdown: m.thermalShutdown,
    supply_undervoltage: m.supplyUndervoltage,
    supply_overvoltage: m.supplyOvervoltage,
    source_failures: m.sourceFailures,
    counter_resets: m.counterResets,
  })),
  warranty_years: r.warrantyYears,
});

export const presentDeviceHealth = (
  h: { state: string; reasons: unknown[]; urgency: number; changedAt: string; evaluatedAt: string } | null,
) =>
  h
    ? { state: h.state, reasons: h.reasons, urgency: h.urgency, changed_at: h.changedAt, evaluated_at: h.evaluatedAt }
    : null;

export const presentModelThresholds = (t: {
  model: string;
  overrides: Record<string, number>;
  thresholds: Record<string, number>;
}) => ({ model: t.model, health_thresholds: t.overrides, effective_thresholds: t.thresholds });
