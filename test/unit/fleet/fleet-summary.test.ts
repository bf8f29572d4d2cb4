import { describe, it, expect } from 'vitest';
import { summarizeFleet } from '#core/fleet/fleet-summary';

describe('fleet summary', () => {
  it('is all zeros for no devices', () => {
    expect(summarizeFleet([])).toEqual({ total: 0, online: 0, offline: 0, updating: 0, byModel: [], byFirmware: [] });
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
    });
  });
});
