/**
 * Site schedules in local wall-clock time (docs/ota.md "Sites"): maintenance windows and update
 * freezes, evaluated in an IANA zone with the zone's DST rules of the day in question.
 *
 * Local times are turned into instants with these rules:
 * - a local time that does not exist (the hour skipped when clocks go forward) means the first
 *   valid local time after it, i.e. the moment of the change;
 * - a local time that exists twice (the hour repeated when clocks go back) means its first
 *   occurrence, so a window or freeze edge inside that hour happens once.
 * A window runs from its start until the local clock first reaches its end: 01:00-04:00 is the
 * local 01:00-04:00 on both DST nights (two real hours in spring, four in autumn). A window that
 * lies wholly inside the skipped hour would vanish that night; it opens at the first valid time
 * and keeps its usual length instead.
 *
 * Pure functions over Intl (the platform's own tz database): no I/O, no clock of their own.
 */

/** `{start:"HH:MM", end:"HH:MM"}` in local time; an end before the start spans midnight. */
export interface LocalWindow {
  start: string;
  end: string;
}

/** `[from, to)` as local date-times `YYYY-MM-DDTHH:MM` in the site's zone. */
export interface SiteFreeze {
  from: string;
  to: string;
  reason?: string;
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** Whether `timeZone` is an IANA zone this runtime knows (case as Intl accepts it). */
export function isKnownTimeZone(timeZone: string): boolean {
  if (timeZone.trim() === '' || timeZone !== timeZone.trim()) return false;
  try {
    formatter(timeZone);
    return true;
  } catch {
    return false;
  }
}

/** The local wall-clock time at `t` as milliseconds of a UTC clock showing the same fields. */
function wallClock(t: number, timeZone: string): number {
  const parts = formatter(timeZone).formatToParts(new Date(t));
  const get = (type: Intl.DateTimeFormatPartTypes): number => Number(parts.find((p) => p.type === type)?.value ?? 0);
  return Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second'));
}

/** The zone's offset from UTC at instant `t`, in milliseconds (seconds dropped). */
function offsetAt(t: number, timeZone: string): number {
  const whole = Math.floor(t / 1000) * 1000;
  return wallClock(whole, timeZone) - whole;
}

/**
 * The instant at which the local clock first shows `wall` (a UTC-clock millisecond value of the
 * local fields), or, when `wall` is skipped, the instant of the change (the first valid local
 * time after it).
 */
export function instantOfLocal(wall: number, timeZone: string): number {
  // Zones change their offset at most once within a day around any date, so the offsets a day
  // before and after cover both sides of a change.
  const before = offsetAt(wall - DAY, timeZone);
  const after = offsetAt(wall + DAY, timeZone);
  const candidates = [wall - before, wall - after].filter((t) => wallClock(t, timeZone) === wall);
  if (candidates.length > 0) return Math.min(...candidates);
  // Skipped: the change lies in (wall - after, wall - before]; find it to the minute.
  let lo = wall - Math.max(before, after);
  let hi = wall - Math.min(before, after);
  const startOffset = offsetAt(lo, timeZone);
  while (hi - lo > MINUTE) {
    const mid = lo + Math.floor((hi - lo) / 2 / MINUTE) * MINUTE;
    if (offsetAt(mid, timeZone) === startOffset) lo = mid;
    else hi = mid;
  }
  return hi;
}

const HH_MM = /^([01]\d|2[0-3]):([0-5]\d)$/;
const LOCAL_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-3]):([0-5]\d)$/;

/** Minutes after midnight of `HH:MM`, or null when it is not that format. */
export function parseHhMm(value: string): number | null {
  const m = HH_MM.exec(value);
  return m ? Number(m[1]) * 60 + Number(m[2]) : null;
}

/** `YYYY-MM-DDTHH:MM` as a UTC-clock millisecond value, or null when malformed or not a calendar date. */
export function parseLocalDateTime(value: string): number | null {
  const m = LOCAL_DATE_TIME.exec(value);
  if (!m) return null;
  const [year, month, day, hour, minute] = m.slice(1).map(Number) as [number, number, number, number, number];
  const wall = Date.UTC(year, month - 1, day, hour, minute);
  const d = new Date(wall);
  if (d.getUTCFullYear() !== year || d.getUTCMonth() !== month - 1 || d.getUTCDate() !== day) return null;
  return wall;
}

/** The window's occurrence that opens on the local date `day` (UTC-clock ms of local midnight). */
function occurrence(window: LocalWindow, startMin: number, endMin: number, day: number, timeZone: string) {
  const startWall = day + startMin * MINUTE;
  const endWall = day + (endMin <= startMin ? DAY : 0) + endMin * MINUTE;
  const start = instantOfLocal(startWall, timeZone);
  let end = instantOfLocal(endWall, timeZone);
  if (end <= start) end = start + (endWall - startWall);
  return { start, end };
}

/**
 * Whether `at` lies inside the local window [start, end) in `timeZone`. No window means no
 * restriction (true). A start equal to the end is a window of the whole day. A window or zone
 * the API would have refused counts as no restriction only for the window (malformed) and as
 * UTC for the zone, so stored data written around the API never blocks a fleet forever.
 */
export function insideLocalWindow(window: LocalWindow | null, timeZone: string, at: Date): boolean {
  if (!window) return true;
  const startMin = parseHhMm(window.start);
  const endMin = parseHhMm(window.end);
  if (startMin === null || endMin === null) return true;
  if (startMin === endMin) return true;
  const zone = isKnownTimeZone(timeZone) ? timeZone : 'UTC';
  const t = at.getTime();
  const today = Math.floor(wallClock(t, zone) / DAY) * DAY;
  // The occurrence that opened yesterday may still run (across midnight, or a long autumn night).
  for (const day of [today - DAY, today]) {
    const { start, end } = occurrence(window, startMin, endMin, day, zone);
    if (t >= start && t < end) return true;
  }
  return false;
}

/**
 * The first freeze in force at `at` (its local `[from, to)` in `timeZone`), or null. Malformed
 * entries are ignored (the API refuses them).
 */
export function activeFreeze(freezes: readonly SiteFreeze[], timeZone: string, at: Date): SiteFreeze | null {
  const zone = isKnownTimeZone(timeZone) ? timeZone : 'UTC';
  const t = at.getTime();
  for (const freeze of freezes) {
    const from = parseLocalDateTime(freeze.from);
    const to = parseLocalDateTime(freeze.to);
    if (from === null || to === null || to <= from) continue;
    if (t >= instantOfLocal(from, zone) && t < instantOfLocal(to, zone)) return freeze;
  }
  return null;
}

/** The UTC instant at which a local freeze edge happens (for presenters and held-until times). */
export function freezeEdgeInstant(localDateTime: string, timeZone: string): Date | null {
  const wall = parseLocalDateTime(localDateTime);
  if (wall === null) return null;
  return new Date(instantOfLocal(wall, isKnownTimeZone(timeZone) ? timeZone : 'UTC'));
}
