import { z } from 'zod';

/**
 * The thresholds of the fixture health rules (docs/fixture-health.md), with their defaults.
 * A model may override any of them (`models.health_thresholds`): rated life and temperature
 * limits differ between drivers. Rates are per day of data in the look-back window, so a
 * fixture that reports every 15 minutes and one that reports hourly are judged alike.
 */
export const HEALTH_THRESHOLD_RULES = {
  /** Rated median useful life (h) when the driver does not report one (D4i MB207). Default 50,000. */
  rated_life_h: z.number().int().min(1).max(1_000_000).default(50_000),
  /** Share of rated life (operating hours) from which a fixture is `watch`. Default 80 %. */
  life_watch_percent: z.number().min(1).max(1000).default(80),
  /** Share of rated life from which a fixture is `replace_soon`. Default 100 %. */
  life_replace_percent: z.number().min(1).max(1000).default(100),
  /** Highest control gear temperature (°C) in the window from which a fixture is `watch`. Default 75. */
  gear_temp_watch_c: z.number().min(-40).max(200).default(75),
  /** Highest control gear temperature (°C) in the window from which a fixture is `replace_soon`. Default 90. */
  gear_temp_replace_c: z.number().min(-40).max(200).default(90),
  /** Thermal derating events per day from which a fixture is `watch`. Default 1. */
  derating_watch_per_day: z.number().min(0).max(100_000).default(1),
  /** Thermal derating events per day from which a fixture is `replace_soon`. Default 10. */
  derating_replace_per_day: z.number().min(0).max(100_000).default(10),
  /** Thermal shutdowns in the window from which a fixture is `watch`. Default 1. */
  shutdown_watch_count: z.number().int().min(1).max(100_000).default(1),
  /** Thermal shutdowns per day from which a fixture is `replace_soon`. Default 1. */
  shutdown_replace_per_day: z.number().min(0).max(100_000).default(1),
  /** Supply under- plus overvoltage events per day from which a fixture is `watch`. Default 2. */
  supply_watch_per_day: z.number().min(0).max(100_000).default(2),
  /** Supply faults per day from which a fixture is `replace_soon`. Default 20. */
  supply_replace_per_day: z.number().min(0).max(100_000).default(20),
  /** Light source failures in the window from which a fixture is `failed`. Default 1. */
  source_failures_failed_count: z.number().int().min(1).max(100_000).default(1),
  /** Days without any reading after which the rules say nothing about rates (too little data). Default 7. */
  window_days: z.number().int().min(1).max(90).default(7),
};

export const HealthThresholds = z.strictObject(HEALTH_THRESHOLD_RULES);
export type HealthThresholds = z.output<typeof HealthThresholds>;

type Rules = typeof HEALTH_THRESHOLD_RULES;
// Without the defaults: an override names only what it changes (`.partial()` would fill in every default).
const overrideShape = Object.fromEntries(
  Object.entries(HEALTH_THRESHOLD_RULES).map(([key, rule]) => [key, rule.unwrap().optional()]),
) as { [K in keyof Rules]: z.ZodOptional<ReturnType<Rules[K]['unwrap']>> };

/** A model's overrides: any subset, validated against the same rules. */
export const HealthThresholdOverrides = z.strictObject(overrideShape).superRefine((t, ctx) => {
  const pairs: Array<[keyof HealthThresholds, keyof HealthThresholds]> = [
    ['life_watch_percent', 'life_replace_percent'],
    ['gear_temp_watch_c', 'gear_temp_replace_c'],
    ['derating_watch_per_day', 'derating_replace_per_day'],
    ['supply_watch_per_day', 'supply_replace_per_day'],
  ];
  const merged = { ...DEFAULT_HEALTH_THRESHOLDS, ...t };
  for (const [watch, replace] of pairs)
    if (merged[watch] > merged[replace])
      ctx.addIssue({ code: 'custom', path: [watch], message: `must not be above ${replace} (${merged[replace]})` });
});
export type HealthThresholdOverrides = z.output<typeof HealthThresholdOverrides>;

export const DEFAULT_HEALTH_THRESHOLDS: HealthThresholds = HealthThresholds.parse({});

/** The defaults with a model's overrides on top (stored overrides were validated when set). */
export function thresholdsFor(overrides: Partial<HealthThresholds> | null | undefined): HealthThresholds {
  return { ...DEFAULT_HEALTH_THRESHOLDS, ...(overrides ?? {}) };
}
