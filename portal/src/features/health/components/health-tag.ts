/** Colour of a health state's tag (docs/fixture-health.md): the worse, the louder. */
export type HealthTagType = 'success' | 'info' | 'warning' | 'error';

export const HEALTH_TAG: Record<string, HealthTagType> = {
  ok: 'success',
  watch: 'info',
  replace_soon: 'warning',
  failed: 'error',
};

export const HEALTH_LABEL: Record<string, string> = {
  ok: 'OK',
  watch: 'Watch',
  replace_soon: 'Replace soon',
  failed: 'Failed',
};
