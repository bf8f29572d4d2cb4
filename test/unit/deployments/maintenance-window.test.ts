import { describe, expect, it } from 'vitest';
import { insideMaintenanceWindow, localMinutes } from '#core/deployments/maintenance-window';

const at = (iso: string) => new Date(iso);
const config = (timezone: string | undefined, start: string, end: string) => ({
  ...(timezone !== undefined ? { timezone } : {}),
  maintenance_window: { start, end },
});

describe('maintenance windows', () => {
  it.each([
    ['no configuration', null],
    ['no window', { timezone: 'Europe/Berlin' }],
    ['a removed window', { timezone: 'Europe/Berlin', maintenance_window: null }],
  ])('do not restrict a device with %s', (_, cfg) => {
    expect(insideMaintenanceWindow(at('2024-01-15T12:00:00Z'), cfg)).toBe(true);
  });

  // [start, end) in UTC, the default zone.
  it.each([
    ['01:59', false],
    ['02:00', true],
    ['03:59', true],
    ['04:00', false],
    ['12:00', false],
  ])('02:00-04:00 UTC at %s: %s', (time, inside) => {
    expect(insideMaintenanceWindow(at(`2024-01-15T${time}:00Z`), config(undefined, '02:00', '04:00'))).toBe(inside);
  });

  // A window whose end is before its start spans midnight.
  it.each([
    ['21:59', false],
    ['22:00', true],
    ['23:30', true],
    ['00:00', true],
    ['03:59', true],
    ['04:00', false],
    ['12:00', false],
  ])('22:00-04:00 UTC (across midnight) at %s: %s', (time, inside) => {
    expect(insideMaintenanceWindow(at(`2024-01-15T${time}:00Z`), config('UTC', '22:00', '04:00'))).toBe(inside);
  });

  it.each([
    // CET (+1) in winter, CEST (+2) in summer: the same window in local time moves in UTC.
    ['Europe/Berlin', '02:00', '04:00', '2024-01-15T01:30:00Z', true],
    ['Europe/Berlin', '02:00', '04:00', '2024-01-15T03:00:00Z', false],
    ['Europe/Berlin', '02:00', '04:00', '2024-07-15T01:30:00Z', true],
    ['Europe/Berlin', '02:00', '04:00', '2024-07-15T02:30:00Z', false],
    // Spring forward: 02:00-03:00 local does not exist that night; the window opens at the first
    // valid local time (03:00 CEST = 01:00Z) for its usual hour (core/sites/site-schedule.ts).
    ['Europe/Berlin', '02:00', '03:00', '2024-03-31T00:59:00Z', false],
    ['Europe/Berlin', '02:00', '03:00', '2024-03-31T01:00:00Z', true],
    ['Europe/Berlin', '02:00', '03:00', '2024-03-31T02:00:00Z', false],
    // Behind UTC, across midnight: 22:30 on the 15th in New York is 03:30 UTC on the 16th.
    ['America/New_York', '22:00', '04:00', '2024-01-16T03:30:00Z', true],
    ['America/New_York', '22:00', '04:00', '2024-01-16T09:00:00Z', false],
    // A half-hour offset (+05:30).
    ['Asia/Kolkata', '09:00', '09:30', '2024-01-15T03:29:00Z', false],
    ['Asia/Kolkata', '09:00', '09:30', '2024-01-15T03:30:00Z', true],
    ['Asia/Kolkata', '09:00', '09:30', '2024-01-15T03:59:00Z', true],
    ['Asia/Kolkata', '09:00', '09:30', '2024-01-15T04:00:00Z', false],
    // Across midnight ahead of UTC: 23:30 local in Tokyo (+9) is 14:30 UTC.
    ['Asia/Tokyo', '23:00', '01:00', '2024-01-15T14:30:00Z', true],
    ['Asia/Tokyo', '23:00', '01:00', '2024-01-15T16:00:00Z', false],
  ])('%s %s-%s at %s: %s', (zone, start, end, time, inside) => {
    expect(insideMaintenanceWindow(at(time), config(zone, start, end))).toBe(inside);
  });

  it.each([
    ['an unknown zone', 'Mars/Olympus_Mons'],
    ['an empty zone', ''],
  ])('read the time in UTC for %s', (_, zone) => {
    expect(insideMaintenanceWindow(at('2024-01-15T10:30:00Z'), config(zone, '10:00', '11:00'))).toBe(true);
    expect(insideMaintenanceWindow(at('2024-01-15T11:30:00Z'), config(zone, '10:00', '11:00'))).toBe(false);
  });

  it.each([
    ['UTC', '2024-01-15T00:00:00Z', 0],
    ['UTC', '2024-01-15T23:59:59Z', 23 * 60 + 59],
    ['Europe/Berlin', '2024-01-15T23:30:00Z', 30],
    ['America/New_York', '2024-07-15T03:15:00Z', 23 * 60 + 15],
  ])('local minutes since midnight in %s at %s: %i', (zone, time, minutes) => {
    expect(localMinutes(at(time), zone)).toBe(minutes);
  });
});
