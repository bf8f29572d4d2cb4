import { useNow } from '@vueuse/core';

/** One clock for every "3 minutes ago" on the page, ticking every 10 s. */
export const now = useNow({ interval: 10_000 });

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
const exact = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const integer = new Intl.NumberFormat();

/** "3 minutes ago" (or "in 2 hours"); "never" for null. */
export function relativeTime(iso: string | null | undefined, reference: Date = now.value): string {
  if (!iso) return 'never';
  const seconds = Math.round((new Date(iso).getTime() - reference.getTime()) / 1000);
  const abs = Math.abs(seconds);
  // Clocks of browser and server differ by a few seconds: both directions read "just now".
  if (abs < 45) return 'just now';
  if (abs < 2700) return relative.format(Math.round(seconds / 60), 'minute');
  if (abs < 79_200) return relative.format(Math.round(seconds / 3600), 'hour');
  if (abs < 2_592_000) return relative.format(Math.round(seconds / 86_400), 'day');
  if (abs < 31_536_000) return relative.format(Math.round(seconds / 2_592_000), 'month');
  return relative.format(Math.round(seconds / 31_536_000), 'year');
}

export function exactTime(iso: string | null | undefined): string {
  return iso ? exact.format(new Date(iso)) : '';
}

export function formatInt(n: number): string {
  return integer.format(n);
}

export function formatMoney(money: { amount: number; currency: string }): string {
  try {
    return new Intl.NumberFormat(undefined, { style: 'currency', currency: money.currency }).format(money.amount);
  } catch {
    // Unknown currency code: show it plainly rather than fail the page.
    return `${money.amount.toFixed(2)} ${money.currency}`;
  }
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/** Human words for machine values: "timed_out" -> "timed out". */
export function humanize(value: string): string {
  return value.replace(/[_.]/g, ' ');
}
