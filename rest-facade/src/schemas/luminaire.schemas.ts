import { z } from 'zod';
import { LUMINAIRE_FIELDS } from '#protocol/luminaire-fields';
import { FIELD_REFUSAL_REASONS } from '#protocol/heartbeat-fields';

/** Luminaire data over REST (docs/luminaire-data.md): a device's series and fleet energy. */

const Instant = z.iso.datetime({ offset: true });
const Day = z.iso.date();

export const LuminaireSeriesQuery = z.strictObject({
  from: Instant.optional().describe('ISO 8601; default: `to` less 1 day (raw), 7 days (hour) or 90 days (day)'),
  to: Instant.optional().describe('ISO 8601, exclusive; default now'),
  resolution: z
    .enum(['raw', 'hour', 'day'])
    .optional()
    .describe(
      'raw: every reading (kept 30 days, at most 31 days per request); hour (kept 1 year, at most 366 days); day (kept as long as the account, at most 3660 days). Default hour',
    ),
});
export type LuminaireSeriesQuery = z.infer<typeof LuminaireSeriesQuery>;

const nullableNumber = z.number().nullable();

export const LuminaireBucketSchema = z
  .object({
    at: z.string().describe('Start of the hour or UTC day'),
    points: z.number().int().describe('Readings in the bucket'),
    energy_wh: z.number().describe('Energy used in the bucket (Wh; sum of counter deltas, never negative)'),
    lifetime_energy_wh: nullableNumber.describe('Energy over every driver the luminaire had, at the end of the bucket'),
    burn_hours: nullableNumber.describe('Light source on-time over every driver, at the end of the bucket (h)'),
    power_avg_w: nullableNumber,
    power_max_w: nullableNumber,
    gear_temp_avg_c: nullableNumber,
    gear_temp_max_c: nullableNumber,
    source_temp_avg_c: nullableNumber,
    source_temp_max_c: nullableNumber,
    output_level_avg_pct: nullableNumber,
    supply_voltage_min_v: nullableNumber,
    supply_voltage_max_v: nullableNumber,
    gear_operating_s: z.number().describe('Counter deltas in the bucket (never negative) from here on'),
    gear_starts: z.number(),
    gear_thermal_derating: z.number(),
    gear_thermal_shutdown: z.number(),
    supply_undervoltage: z.number(),
    supply_overvoltage: z.number(),
    source_on_s: z.number(),
    source_starts: z.number(),
    source_failures: z.number(),
    counter_resets: z
      .number()
      .int()
      .describe('Readings in the bucket that showed a counter going down (a driver replaced)'),
  })
  .meta({ id: 'LuminaireBucket' });

export const LuminairePointSchema = z
  .object({
    at: z.string(),
    bad_clock: z.boolean().describe("The device's `at` was missing or off: `at` is the time of receipt"),
    lifetime_energy_wh: z.number().optional(),
  })
  .catchall(z.number())
  .meta({ id: 'LuminairePoint', description: 'One reading: the fields the device sent, as it sent them.' });

export const LuminaireSeriesSchema = z
  .object({
    serial: z.string(),
    resolution: z.enum(['raw', 'hour', 'day']),
    from: z.string(),
    to: z.string(),
    truncated: z.boolean().describe('More than 50,000 points: ask for a shorter range or a coarser resolution'),
    points: z.array(z.union([LuminaireBucketSchema, LuminairePointSchema])),
  })
  .meta({ id: 'LuminaireSeries' });

export const LuminaireSummarySchema = z
  .object({
    latest: z.record(z.string(), z.number()).describe('The latest value of each field the device sent'),
    latest_at: z.string().nullable(),
    lifetime_energy_kwh: nullableNumber.describe('Energy over every driver the luminaire had (kWh)'),
    burn_hours: nullableNumber.describe('Light source on-time over every driver (h)'),
    rated_life_h: nullableNumber,
    points: z.number().int(),
    counter_resets: z.number().int(),
    bad_clock_count: z
      .number()
      .int()
      .describe("Readings whose `at` was missing or further than 300 s from the service's clock"),
    last_bad_clock_at: z.string().nullable(),
    refused_fields: z
      .partialRecord(
        z.enum(LUMINAIRE_FIELDS),
        z.object({ count: z.number().int(), reason: z.enum(FIELD_REFUSAL_REASONS), value: z.string(), at: z.string() }),
      )
      .describe('Luminaire fields refused since the claim (the rest of each reading was recorded)'),
  })
  .meta({ id: 'LuminaireSummary' });

export const DeviceLuminaireSchema = z
  .object({ serial: z.string(), luminaire: LuminaireSummarySchema.nullable() })
  .meta({ id: 'DeviceLuminaire' });

const GROUP_BY = /^(model|firmware|site|tag:[^\s]{1,64})$/;

export const EnergyQuery = z.strictObject({
  from: Day.optional().describe('First UTC day (YYYY-MM-DD); default 29 days before `to`'),
  to: Day.optional().describe('Last UTC day, inclusive; default today'),
  group_by: z
    .string()
    .regex(GROUP_BY, 'must be model, firmware, site or tag:<key>')
    .optional()
    .describe('model (default), firmware, site or tag:<key>: what each reading was attributed to when it was taken'),
});
export type EnergyQuery = z.infer<typeof EnergyQuery>;

export const EnergySchema = z
  .object({
    from: z.string(),
    to: z.string(),
    group_by: z.string(),
    unit: z.literal('kWh'),
    days: z.array(z.string()).describe('Every UTC day from `from` to `to`'),
    groups: z.array(
      z.object({
        key: z
          .string()
          .nullable()
          .describe('null: readings without a value for the grouping (no firmware reported, no site, no such tag)'),
        total_kwh: z.number(),
        kwh: z.array(z.number()).describe('kWh per day, in the order of `days`'),
      }),
    ),
  })
  .meta({ id: 'FleetEnergy' });
