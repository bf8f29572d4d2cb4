/**
 * Which firmware versions' fixture rates stand out from the rest of their model, for the firmware
 * page's rates table (docs/fixture-health.md). A reading aid, not the rollout's gate (which tests
 * the ratio with confidence bounds): a version is marked on a signal when it saw at least
 * `MIN_EVENTS` events and its rate is more than `FACTOR` times the rate of the model's other
 * versions pooled (their events over their exposure), so one noisy event on a small version
 * marks nothing.
 */
export const FACTOR = 2;
export const MIN_EVENTS = 3;

export interface VersionFigures {
  model: string;
  firmware: string | null;
  /** Device-days each signal's rate is taken over (luminaire signals and connection signals differ). */
  exposure: Record<string, number>;
  /** Events per signal; null where the signal is not measured. */
  events: Record<string, number | null>;
}

/** The key of a model and version: firmware null (not reported) is a version of its own. */
export const versionKey = (v: { model: string; firmware: string | null }): string =>
  `${v.model}\u0000${v.firmware ?? ''}`;

/** Per version key, the signals on which that version stands out. */
export function rateOutliers(
  versions: readonly VersionFigures[],
  signals: readonly string[],
): Map<string, Set<string>> {
  const marked = new Map<string, Set<string>>();
  for (const v of versions) {
    const others = versions.filter((o) => o.model === v.model && o !== v);
    for (const signal of signals) {
      const mine = v.events[signal];
      const days = v.exposure[signal] ?? 0;
      if (mine === null || mine === undefined || mine < MIN_EVENTS || days <= 0) continue;
      const measured = others.filter((o) => o.events[signal] != null && (o.exposure[signal] ?? 0) > 0);
      const otherDays = measured.reduce((sum, o) => sum + (o.exposure[signal] ?? 0), 0);
      if (otherDays <= 0) continue;
      const otherEvents = measured.reduce((sum, o) => sum + (o.events[signal] ?? 0), 0);
      if (mine / days > (FACTOR * otherEvents) / otherDays) {
        const set = marked.get(versionKey(v)) ?? new Set<string>();
        set.add(signal);
        marked.set(versionKey(v), set);
      }
    }
  }
  return marked;
}
