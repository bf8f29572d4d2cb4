import { describe, expect, it } from 'vitest';
import { activeFreeze, freezeEdgeInstant, insideLocalWindow } from '#core/sites/site-schedule';
import { effectiveWindow, insideMaintenanceWindow } from '#core/deployments/maintenance-window';

const at = (iso: string) => new Date(iso);
const w = (start: string, end: string) => ({ start, end });

/**
 * Local windows and freezes on the nights clocks change (docs/ota.md "Sites"). Instants are UTC;
 * the comment on each row gives the local time.
 */
describe('local windows across DST changes', () => {
  // Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST (01:00Z); 2026-10-25 03:00 CEST -> 02:00 CET (01:00Z).
  // America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z); 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z).
  it.each([
    // 01:00-04:00 is the local 01:00-04:00: two real hours in spring...
    ['Europe/Berlin', '01:00', '04:00', '2026-03-28T23:59:00Z', false], // 00:59 CET
    ['Europe/Berlin', '01:00', '04:00', '2026-03-29T00:00:00Z', true], // 01:00 CET
    ['Europe/Berlin', '01:00', '04:00', '2026-03-29T01:00:00Z', true], // 03:00 CEST
    ['Europe/Berlin', '01:00', '04:00', '2026-03-29T01:59:00Z', true], // 03:59 CEST
    ['Europe/Berlin', '01:00', '04:00', '2026-03-29T02:00:00Z', false], // 04:00 CEST
    // ...and four in autumn.
    ['Europe/Berlin', '01:00', '04:00', '2026-10-24T22:59:00Z', false], // 00:59 CEST
    ['Europe/Berlin', '01:00', '04:00', '2026-10-24T23:00:00Z', true], // 01:00 CEST
    ['Europe/Berlin', '01:00', '04:00', '2026-10-25T01:30:00Z', true], // second 02:30 (CET)
    ['Europe/Berlin', '01:00', '04:00', '2026-10-25T02:59:00Z', true], // 03:59 CET
    ['Europe/Berlin', '01:00', '04:00', '2026-10-25T03:00:00Z', false], // 04:00 CET
    // Starting in the skipped hour: opens at the first valid local time after it (03:00 CEST).
    ['Europe/Berlin', '02:30', '04:00', '2026-03-29T00:59:00Z', false], // 01:59 CET
    ['Europe/Berlin', '02:30', '04:00', '2026-03-29T01:00:00Z', true], // 03:00 CEST
    ['Europe/Berlin', '02:30', '04:00', '2026-03-29T01:59:00Z', true], // 03:59 CEST
    ['Europe/Berlin', '02:30', '04:00', '2026-03-29T02:00:00Z', false], // 04:00 CEST
    // Wholly inside the skipped hour: it does not vanish; it opens at 03:00 for its usual length.
    ['Europe/Berlin', '02:00', '03:00', '2026-03-29T00:59:00Z', false],
    ['Europe/Berlin', '02:00', '03:00', '2026-03-29T01:00:00Z', true], // 03:00 CEST
    ['Europe/Berlin', '02:00', '03:00', '2026-03-29T02:00:00Z', false], // 04:00 CEST
    // Inside the repeated hour: runs once, in the first occurrence.
    ['Europe/Berlin', '02:15', '02:45', '2026-10-25T00:15:00Z', true], // first 02:15 (CEST)
    ['Europe/Berlin', '02:15', '02:45', '2026-10-25T00:44:00Z', true],
    ['Europe/Berlin', '02:15', '02:45', '2026-10-25T00:45:00Z', false],
    ['Europe/Berlin', '02:15', '02:45', '2026-10-25T01:15:00Z', false], // second 02:15 (CET)
    ['Europe/Berlin', '02:15', '02:45', '2026-10-25T01:30:00Z', false],
    // The same windows on ordinary nights either side.
    ['Europe/Berlin', '02:15', '02:45', '2026-10-26T01:30:00Z', true], // 02:30 CET
    ['Europe/Berlin', '02:30', '04:00', '2026-03-30T00:30:00Z', true], // 02:30 CEST
    // New York, spring: 02:00-03:00 does not exist on 2026-03-08.
    ['America/New_York', '01:00', '04:00', '2026-03-08T06:00:00Z', true], // 01:00 EST
    ['America/New_York', '01:00', '04:00', '2026-03-08T07:59:00Z', true], // 03:59 EDT
    ['America/New_York', '01:00', '04:00', '2026-03-08T08:00:00Z', false], // 04:00 EDT
    ['America/New_York', '02:30', '04:00', '2026-03-08T06:59:00Z', false], // 01:59 EST
    ['America/New_York', '02:30', '04:00', '2026-03-08T07:00:00Z', true], // 03:00 EDT
    // Across midnight, ending in the skipped hour: ends at the change (03:00 EDT).
    ['America/New_York', '22:00', '02:30', '2026-03-08T03:00:00Z', true], // 22:00 EST on the 7th
    ['America/New_York', '22:00', '02:30', '2026-03-08T06:59:00Z', true], // 01:59 EST
    ['America/New_York', '22:00', '02:30', '2026-03-08T07:00:00Z', false], // 03:00 EDT
    // New York, autumn: 01:00-02:00 happens twice on 2026-11-01.
    ['America/New_York', '01:00', '04:00', '2026-11-01T04:59:00Z', false], // 00:59 EDT
    ['America/New_York', '01:00', '04:00', '2026-11-01T05:00:00Z', true], // first 01:00 (EDT)
    ['America/New_York', '01:00', '04:00', '2026-11-01T06:30:00Z', true], // second 01:30 (EST)
    ['America/New_York', '01:00', '04:00', '2026-11-01T08:59:00Z', true], // 03:59 EST
    ['America/New_York', '01:00', '04:00', '2026-11-01T09:00:00Z', false], // 04:00 EST
    ['America/New_York', '01:10', '01:50', '2026-11-01T05:30:00Z', true], // first 01:30
    ['America/New_York', '01:10', '01:50', '2026-11-01T06:30:00Z', false], // second 01:30: runs once
    // No DST: Kolkata (+05:30) and Tokyo (+09:00) are the same on those dates.
    ['Asia/Kolkata', '01:00', '04:00', '2026-03-28T19:29:00Z', false], // 00:59
    ['Asia/Kolkata', '01:00', '04:00', '2026-03-28T19:30:00Z', true], // 01:00
    ['Asia/Kolkata', '01:00', '04:00', '2026-03-28T22:29:00Z', true], // 03:59
    ['Asia/Kolkata', '01:00', '04:00', '2026-03-28T22:30:00Z', false], // 04:00
    ['Asia/Tokyo', '23:00', '01:00', '2026-10-24T14:30:00Z', true], // 23:30
    ['Asia/Tokyo', '23:00', '01:00', '2026-10-24T16:00:00Z', false], // 01:00
  ])('%s %s-%s at %s: %s', (zone, start, end, time, inside) => {
    expect(insideLocalWindow(w(start, end), zone, at(time))).toBe(inside);
  });

  it('does not restrict without a window; reads an unknown zone as UTC', () => {
    expect(insideLocalWindow(null, 'Europe/Berlin', at('2026-01-01T12:00:00Z'))).toBe(true);
    expect(insideLocalWindow(w('10:00', '11:00'), 'Mars/Olympus', at('2026-01-01T10:30:00Z'))).toBe(true);
    expect(insideLocalWindow(w('10:00', '11:00'), 'Mars/Olympus', at('2026-01-01T11:30:00Z'))).toBe(false);
  });
});

describe('freezes in local date-time', () => {
  const freezes = [
    { from: '2026-03-29T02:30', to: '2026-03-29T05:00', reason: 'commissioning' },
    { from: '2026-10-25T02:10', to: '2026-10-25T02:50' },
    { from: '2026-12-24T08:00', to: '2026-12-27T08:00', reason: 'holidays' },
  ];
  it.each([
    ['2026-03-29T00:59:00Z', null], // 01:59 CET
    ['2026-03-29T01:00:00Z', 'commissioning'], // 03:00 CEST: a start in the skipped hour starts at the change
    ['2026-03-29T02:59:00Z', 'commissioning'], // 04:59 CEST
    ['2026-03-29T03:00:00Z', null], // 05:00 CEST
    ['2026-10-25T00:30:00Z', '2026-10-25T02:10'], // first 02:30
    ['2026-10-25T01:30:00Z', null], // second 02:30: in the first occurrence only
    ['2026-12-24T06:59:00Z', null],
    ['2026-12-24T07:00:00Z', 'holidays'], // 08:00 CET
    ['2026-12-27T06:59:00Z', 'holidays'],
    ['2026-12-27T07:00:00Z', null],
  ])('Europe/Berlin at %s: %s', (time, expected) => {
    const found = activeFreeze(freezes, 'Europe/Berlin', at(time));
    expect(found === null ? null : (found.reason ?? found.from)).toBe(expected);
  });

  it('reads each site in its own zone', () => {
    const holiday = [{ from: '2026-07-04T00:00', to: '2026-07-05T00:00' }];
    expect(activeFreeze(holiday, 'America/New_York', at('2026-07-04T03:59:00Z'))).toBeNull(); // 23:59 on the 3rd
    expect(activeFreeze(holiday, 'America/New_York', at('2026-07-04T04:00:00Z'))).not.toBeNull();
    expect(activeFreeze(holiday, 'Asia/Kolkata', at('2026-07-03T18:30:00Z'))).not.toBeNull(); // 00:00 IST
    expect(freezeEdgeInstant('2026-03-08T02:30', 'America/New_York')?.toISOString()).toBe('2026-03-08T07:00:00.000Z');
  });
});

describe("a device's window overrides its site's", () => {
  const site = { timeZone: 'America/New_York', window: w('01:00', '03:00') };
  it('uses the site window in the site zone when the device has none', () => {
    expect(effectiveWindow({}, site)).toEqual({ window: site.window, timeZone: 'America/New_York', source: 'site' });
    expect(insideMaintenanceWindow(at('2026-01-15T06:30:00Z'), {}, site)).toBe(true); // 01:30 EST
    expect(insideMaintenanceWindow(at('2026-01-15T01:30:00Z'), {}, site)).toBe(false);
  });
  it("uses the device's window, in its own zone, else in the site's", () => {
    const own = { maintenance_window: w('12:00', '13:00') };
    expect(effectiveWindow(own, site)?.timeZone).toBe('America/New_York');
    expect(insideMaintenanceWindow(at('2026-01-15T17:30:00Z'), own, site)).toBe(true); // 12:30 EST
    expect(insideMaintenanceWindow(at('2026-01-15T06:30:00Z'), own, site)).toBe(false); // site window ignored
    const zoned = { ...own, timezone: 'Europe/Berlin' };
    expect(insideMaintenanceWindow(at('2026-01-15T11:30:00Z'), zoned, site)).toBe(true); // 12:30 CET
    expect(effectiveWindow(own, null)?.timeZone).toBe('UTC');
    expect(effectiveWindow({}, { timeZone: 'Europe/Berlin', window: null })).toBeNull();
  });
});
