import { z } from 'zod';
import { HEALTH_RULES, HEALTH_STATES } from '#core/health/health-rules';
import { FIXTURE_SIGNALS, GATE_STATES, SIGNAL_VERDICTS } from '#core/health/fixture-gate';
import { HealthThresholdOverrides } from '#core/health/health-thresholds';

/** Fixture health over REST (docs/fixture-health.md): maintenance, warranty evidence, per-version rates, canary against control. */

export const MaintenanceQuery = z.strictObject({
  model: z.string().min(1).max(64).optional().describe('Only devices of this model (name)'),
  tag: z
    .string()
    .regex(/^[^=]{1,64}=.{0,256}$/, 'must be key=value')
    .optional()
    .describe('Only devices with this tag value, as `key=value`'),
  site: z.uuid().optional().describe('Only devices of this site (id)'),
  limit: z.coerce.number().int().min(1).max(10_000).optional().describe('At most this many devices (default 1,000)'),
});
export type MaintenanceQuery = z.infer<typeof MaintenanceQuery>;

export const HealthReasonSchema = z.object({
  rule: z.enum(HEALTH_RULES),
  state: z.enum(HEALTH_STATES),
  text: z.string().describe('In words, with the figures'),
  value: z.number(),
  limit: z.number(),
});

export const MaintenanceItemSchema = z.object({
  serial: z.string(),
  name: z.string(),
  model: z.string(),
  firmware: z.string().nullable(),
  tags: z.record(z.string(), z.string()),
  site: z.object({ id: z.string(), name: z.string().nullable() }).nullable(),
  state: z.enum(HEALTH_STATES),
  reasons: z.array(HealthReasonSchema).describe('Worst first'),
  urgency: z.number().describe("Sort key: the state's rank × 10 plus how far the worst reason is past its limit"),
  changed_at: z.string(),
  evaluated_at: z.string(),
});
export const MaintenanceSchema = z.object({
  counts: z
    .record(z.enum(HEALTH_STATES), z.number().int())
    .describe('Devices per health state in the account (unfiltered)'),
  items: z.array(MaintenanceItemSchema).describe('Devices not `ok`, most urgent first'),
});

const signalRecord = z.record(z.enum(FIXTURE_SIGNALS), z.number().nullable());
export const VersionRatesQuery = z.strictObject({
  from: z.iso.datetime({ offset: true }).optional().describe('Default: `to` less 30 days'),
  to: z.iso.datetime({ offset: true }).optional().describe('Exclusive; default now'),
  model: z.string().min(1).max(64).optional(),
});
export const VersionRatesSchema = z.object({
  from: z.string(),
  to: z.string(),
  versions: z.array(
    z.object({
      model: z.string(),
      firmware: z.string().nullable(),
      devices: z.number().int(),
      device_days: z.number().describe('Device-days with luminaire readings: the exposure of the luminaire signals'),
      connected_device_days: z
        .number()
        .describe(
          'Device-days the devices were heard (connected or reporting): the exposure of unexpected_reboots and reconnects',
        ),
      events: signalRecord,
      per_1000_device_days: signalRecord.describe("null: the signal's exposure is zero (nothing measured)"),
    }),
  ),
});

const GroupSchema = z.object({
  devices: z.number().int(),
  device_days: z.number(),
  connected_device_days: z.number().nullable().describe('null in decisions recorded before it was measured'),
});
const CountSchema = z.object({
  events: z.number(),
  device_days: z.number().nullable().describe("This signal's exposure; null in decisions recorded before it was shown"),
  per_1000_device_days: z.number(),
});
const GateDecisionSchema = z.object({
  state: z.enum(GATE_STATES),
  compared_with: z.enum(['control', 'baseline']).nullable(),
  updated: GroupSchema,
  control: GroupSchema.nullable(),
  signals: z.array(
    z.object({
      signal: z.enum(FIXTURE_SIGNALS),
      updated: CountSchema,
      control: CountSchema,
      ratio: z.number(),
      ratio_lower_bound: z.number(),
      p_value: z.number(),
      verdict: z.enum(SIGNAL_VERDICTS),
    }),
  ),
  summary: z.string(),
});
export const FixtureGateSchema = z.object({
  deployment_id: z.string(),
  gated: z
    .boolean()
    .describe('Whether the rollout names fixture signals (otherwise `current` is for information and never pauses)'),
  current: GateDecisionSchema,
  recorded: z
    .object({ decision: GateDecisionSchema, evaluated_at: z.string(), paused_at: z.string().nullable() })
    .nullable()
    .describe('What the gate pass stored last, and when it paused the deployment'),
});

export const WarrantyReportSchema = z.object({
  serial: z.string(),
  model: z.string(),
  claim_date: z.string(),
  claims: z.array(z.object({ claimed_at: z.string(), unclaimed_at: z.string().nullable() })),
  generated_at: z.string(),
  operating_hours: z.number().nullable(),
  lifetime_energy_kwh: z.number().nullable(),
  firmware_history: z.array(
    z.object({
      firmware: z.string().nullable(),
      from: z.string(),
      to: z.string(),
      source: z.enum(['readings', 'update']),
    }),
  ),
  fault_counters: z.array(
    z.object({
      month: z.string(),
      days: z.number().int(),
      energy_kwh: z.number(),
      thermal_derating: z.number(),
      thermal_shutdown: z.number(),
      supply_undervoltage: z.number(),
      supply_overvoltage: z.number(),
      source_failures: z.number(),
      counter_resets: z.number(),
    }),
  ),
  warranty_years: z.number().int(),
});

export const DeviceHealthSchema = z
  .object({
    state: z.enum(HEALTH_STATES),
    reasons: z.array(HealthReasonSchema).describe('Worst first; empty when `ok`'),
    urgency: z.number(),
    changed_at: z.string().describe('When the state last changed'),
    evaluated_at: z.string().describe('When the health pass last judged the device'),
  })
  .meta({ id: 'DeviceHealth' });

export const ModelNameParams = z.strictObject({ name: z.string().min(1).max(64) });
export const ModelThresholdsBody = z.strictObject({
  health_thresholds: HealthThresholdOverrides.nullable().describe(
    "The model's overrides of the health rules' thresholds (docs/fixture-health.md); replaces the previous overrides; null or {} goes back to the defaults",
  ),
});
export const ModelThresholdsSchema = z.object({
  model: z.string(),
  health_thresholds: z.record(z.string(), z.number()).describe("The model's overrides only"),
  effective_thresholds: z.record(z.string(), z.number()).describe('The defaults with the overrides on top'),
});
