/**
 * A SQL literal list of state names (`'queued','sent'`) made from the state constants, so a
 * state is never typed again as a literal inside SQL text. Only for the constants' own values:
 * they are code, not input.
 */
export function sqlList(values: readonly string[]): string {
  return values.map((v) => `'${v.replace(/'/g, "''")}'`).join(',');
}
