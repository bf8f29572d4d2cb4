import { describe, it, expect } from 'vitest';
import { summarizeFleet } from '#core/fleet/fleet-summary';

describe('fleet summary', () => {
  it('is all zeros for no devices', () => {
    expect(summarizeFleet([])).toEqual({
      total: 0,
      online: 0,
      offline: 0,
      updating: 0,
      byModel: [],
      byFirmware: [],
      bySite: [],
    });
  });

  it('adds groups up by status, model and firmware, largest first, ties by name', () => {
    const summary = summarizeFleet([
      { model: 'LX-200', firmware: '1.0.0', status: 'online', count: 3 },
      { model: 'LX-200', firmware: '1.0.0', status: 'offline', count: 1 },
      { model: 'LX-300', firmware: null, status: 'offline', count: 2 },
      { model: 'LX-100', firmware: '2.0.0', status: 'updating', count: 2 },
    ]);
    expect(summary).toEqual({
      total: 8,
      online: 3,
      offline: 3,
      updating: 2,
      byModel: [
        { model: 'LX-200', count: 4 },
        { model: 'LX-100', count: 2 },
        { model: 'LX-300', count: 2 },
      ],
      byFirmware: [
        { firmware: '1.0.0', count: 4 },
        { firmware: '2.0.0', count: 2 },
        { firmware: null, count: 2 },
      ],
      bySite: [{ site: null, count: 8, online: 3, offline: 3, updating: 2 }],
    });
  });

  it('counts devices per site by status, largest first, devices without a site last', () => {
    const berlin = { id: 'b', name: 'Berlin HQ' };
    const austin = { id: 'a', name: 'Austin plant' };
    const summary = summarizeFleet([
      { model: 'LX-200', firmware: '1.0.0', status: 'online', count: 1, site: austin },
      { model: 'LX-200', firmware: '1.0.0', status: 'online', count: 2, site: berlin },
      { model: 'LX-200', firmware: '1.0.0', status: 'offline', count: 1, site: berlin },
      { model: 'LX-100', firmware: '1.0.0', status: 'updating', count: 9, site: null },
      { model: 'LX-100', firmware: '1.0.0', status: 'updating', count: 1, site: austin },
    ]);
    expect(summary.bySite).toEqual([
      { site: berlin, count: 3, online: 2, offline: 1, updating: 0 },
      { site: austin, count: 2, online: 1, offline: 0, updating: 1 },
      { site: null, count: 9, online: 0, offline: 0, updating: 9 },
    ]);
  });
});
