import { z } from 'zod';
import { readFields, type PayloadUnread, type RefusedField } from './field-reading';

/**
 * `devices/{serial}/luminaire`: one reading of the luminaire's D4i data (DALI-2 parts 251-253,
 * memory banks 202-207), QoS 1, JSON, every field optional. Read field by field as heartbeats
 * are: a field that fails its schema is refused on its own (counted per device with its reason),
 * the valid ones are recorded. Unlike a heartbeat, every reading is stored (a series, not the
 * latest values), and its PUBACK comes once it is (docs/device-protocol.md "Luminaire data").
 */

/** Largest value of a D4i 32-bit counter; the service takes counters up to this. */
export const MAX_COUNTER = 4_294_967_295;
/** MB202 active energy is 6 bytes of Wh. */
export const MAX_ENERGY_WH = 281_474_976_710_655;

const counter = (description: string) => z.number().int().min(0).max(MAX_COUNTER).optional().meta({ description });
const gauge = (min: number, max: number, description: string) =>
  z.number().min(min).max(max).optional().meta({ description });

export const LuminaireReading = z
  .object({
    energy_wh: z
      .number()
      .min(0)
      .max(MAX_ENERGY_WH)
      .optional()
      .meta({ description: 'Cumulative active energy of the control gear, Wh (MB202); may reset (driver replaced).' }),
    power_w: gauge(0, 100_000, 'Active power now, W (MB202).'),
    gear_operating_s: counter('Control gear operating time, s (MB205).'),
    gear_starts: counter('Control gear start counter (MB205).'),
    gear_temp_c: gauge(-60, 200, 'Control gear temperature, °C (MB205).'),
    gear_thermal_derating: counter('Times the gear derated its output for temperature (MB205).'),
    gear_thermal_shutdown: counter('Times the gear shut down for temperature (MB205).'),
    supply_voltage_v: gauge(0, 1000, 'RMS supply voltage, V (MB205).'),
    supply_undervoltage: counter('Supply undervoltage events (MB205).'),
    supply_overvoltage: counter('Supply overvoltage events (MB205).'),
    source_on_s: counter('Light source on-time, s (MB206).'),
    source_starts: counter('Light source start counter (MB206).'),
    source_temp_c: gauge(-60, 200, 'Light source temperature, °C (MB206).'),
    source_failures: counter('Light source failure events (MB206).'),
    output_level_pct: gauge(0, 100, 'Light output level now, % (0 = off).'),
    rated_life_h: z
      .number()
      .int()
      .min(0)
      .max(1_000_000)
      .optional()
      .meta({ description: 'Rated median useful life of the light source, h (MB207).' }),
    at: z.iso.datetime({ offset: true }).optional().meta({
      description:
        "The device's time of the reading (ISO 8601 with Z or an offset). Missing, or further than 300 s from the service's clock: the time of receipt is used and the device is counted as having a bad clock.",
    }),
  })
  .meta({
    id: 'LuminaireReading',
    description:
      'devices/{serial}/luminaire: one D4i reading, every field optional (QoS 1; acknowledged once stored). Counters that go down start a new segment (a driver replaced).',
  });
export type LuminaireReading = z.infer<typeof LuminaireReading>;

export const LUMINAIRE_FIELDS = [
  'energy_wh',
  'power_w',
  'gear_operating_s',
  'gear_starts',
  'gear_temp_c',
  'gear_thermal_derating',
  'gear_thermal_shutdown',
  'supply_voltage_v',
  'supply_undervoltage',
  'supply_overvoltage',
  'source_on_s',
  'source_starts',
  'source_temp_c',
  'source_failures',
  'output_level_pct',
  'rated_life_h',
  'at',
] as const;
export type LuminaireField = (typeof LUMINAIRE_FIELDS)[number];
/** The measured values of a reading (every field but `at`). */
export type LuminaireValues = Omit<LuminaireReading, 'at'>;

/** Fields that only ever count up, until the gear is replaced (then they restart: a new segment). */
export const LUMINAIRE_COUNTERS = [
  'energy_wh',
  'gear_operating_s',
  'gear_starts',
  'gear_thermal_derating',
  'gear_thermal_shutdown',
  'supply_undervoltage',
  'supply_overvoltage',
  'source_on_s',
  'source_starts',
  'source_failures',
] as const satisfies readonly LuminaireField[];
export type LuminaireCounter = (typeof LUMINAIRE_COUNTERS)[number];

/**
 * How far a reading's `at` may be from the service's clock (seconds, either way). A device whose
 * clock is further off, or that sends no `at`, has its reading stamped with the time of receipt
 * and is counted as having a bad clock: storage is partitioned by time, so a reading dated years
 * away must not land there, and a few minutes cover a QoS 1 redelivery after a reconnect.
 */
export const LUMINAIRE_CLOCK_TOLERANCE_S = 300;

export type RefusedLuminaireField = RefusedField<LuminaireField>;

export type LuminaireUnread = PayloadUnread;

export type LuminaireRead =
  | {
      ok: true;
      values: LuminaireValues;
      /** When the reading was taken: the device's `at`, or `receivedAt` when that is missing or off. */
      at: Date;
      /** `at` was missing or further than the tolerance from the service's clock. */
      badClock: boolean;
      refused: RefusedLuminaireField[];
    }
  | { ok: false; reason: LuminaireUnread };

export function readLuminaire(payload: Buffer | string, receivedAt: Date): LuminaireRead {
  const read = readFields(payload, LUMINAIRE_FIELDS, LuminaireReading.shape);
  if (!read.ok) return read;
  const { at: deviceAt, ...rest } = read.values;
  // Each field was parsed by its own schema of LuminaireReading: TypeScript cannot pair them by key.
  const values = rest as LuminaireValues;
  const refused = read.refused;
  const device = typeof deviceAt === 'string' ? Date.parse(deviceAt) : NaN;
  const badClock = Number.isNaN(device) || Math.abs(device - receivedAt.getTime()) > LUMINAIRE_CLOCK_TOLERANCE_S * 1000;
  return {
    ok: true,
    values,
    at: badClock ? receivedAt : new Date(device),
    badClock,
    refused,
  };
}
