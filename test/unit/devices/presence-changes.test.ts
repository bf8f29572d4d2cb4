import { describe, it, expect } from 'vitest';
import { firmwareReports, presenceRecords, type PresenceChange } from '#core/devices/presence-changes';

const seen = new Date('2026-03-01T12:00:00.000Z');
const steady: PresenceChange = {
  deviceId: 'd1',
  accountId: 'a1',
  serial: 'SN-1',
  prevConnectivity: 'online',
  prevStatus: 'online',
  prevFirmware: '1.0.0',
  connectivity: 'online',
  status: 'online',
  firmware: '1.0.0',
  ip: '10.0.0.7',
  lastSeen: seen,
  currentUpdateId: null,
  firmwareReported: false,
  prevReportedConfigVersion: 1,
  reportedConfigVersion: 1,
};
const change = (delta: Partial<PresenceChange>): PresenceChange => ({ ...steady, ...delta });

describe('presence history and events', () => {
  it.each<[string, PresenceChange, string[], string[]]>([
    ['nothing changed', steady, [], []],
    [
      'comes online',
      change({ prevConnectivity: 'offline', prevStatus: 'offline' }),
      ['status_changed'],
      ['device.online'],
    ],
    ['goes offline', change({ connectivity: 'offline', status: 'offline' }), ['status_changed'], ['device.offline']],
    [
      'online to updating (no connectivity change)',
      change({ status: 'updating', currentUpdateId: 'u1' }),
      ['status_changed'],
      [],
    ],
    ['reports the firmware it had', change({ firmwareReported: true }), [], []],
    [
      'reports new firmware during an update',
      change({ firmwareReported: true, firmware: '2.0.0', currentUpdateId: 'u1' }),
      ['firmware_changed'],
      [],
    ],
    [
      'reports new firmware with no update in progress',
      change({ firmwareReported: true, firmware: '2.0.0' }),
      ['firmware_changed_outside_ota'],
      [],
    ],
    ['reports its first firmware', change({ firmwareReported: true, prevFirmware: null }), ['firmware_changed'], []],
    ['a changed firmware not reported in this batch', change({ firmware: '2.0.0' }), [], []],
    ['applies a configuration', change({ reportedConfigVersion: 2 }), ['config_applied'], ['device.config_applied']],
    [
      'applies its first configuration',
      change({ prevReportedConfigVersion: null }),
      ['config_applied'],
      ['device.config_applied'],
    ],
  ])('%s', (_, c, history, events) => {
    const records = presenceRecords([c], () => 'disconnected');
    expect(records.history.map((h) => h.type)).toEqual(history);
    expect(records.events.map((e) => e.type)).toEqual(events);
  });

  it('gives the offline reason in history and event, and none when coming online', () => {
    const off = presenceRecords([change({ connectivity: 'offline', status: 'offline' })], (id) =>
      id === 'd1' ? 'last_will' : null,
    );
    expect(off.history[0]).toEqual({
      accountId: 'a1',
      deviceId: 'd1',
      type: 'status_changed',
      data: { from: 'online', to: 'offline', reason: 'last_will' },
    });
    expect(off.events[0]).toEqual({
      accountId: 'a1',
      type: 'device.offline',
      subject: 'SN-1',
      data: {
        device_id: 'd1',
        serial: 'SN-1',
        status: 'offline',
        connectivity: 'offline',
        firmware: '1.0.0',
        ip: '10.0.0.7',
        last_seen: '2026-03-01T12:00:00.000Z',
        reason: 'last_will',
      },
    });
    const on = presenceRecords(
      [change({ prevConnectivity: 'offline', prevStatus: 'offline', lastSeen: null })],
      () => 'last_will',
    );
    expect(on.history[0]!.data).toEqual({ from: 'offline', to: 'online' });
    expect(on.events[0]!.data).toMatchObject({ last_seen: null });
    expect(on.events[0]!.data).not.toHaveProperty('reason');
  });

  it('keeps the order of the batch', () => {
    const records = presenceRecords(
      [
        change({ deviceId: 'd2', serial: 'SN-2', connectivity: 'offline', status: 'offline' }),
        change({ deviceId: 'd3', serial: 'SN-3', prevConnectivity: 'offline', prevStatus: 'offline' }),
      ],
      () => null,
    );
    expect(records.events.map((e) => e.subject)).toEqual(['SN-2', 'SN-3']);
  });
});

describe('firmware reports for the OTA engine', () => {
  it.each<[string, PresenceChange, boolean]>([
    ['no firmware in the batch', steady, false],
    ['the same firmware, no update', change({ firmwareReported: true }), false],
    ['the same firmware during an update', change({ firmwareReported: true, currentUpdateId: 'u1' }), true],
    ['another firmware', change({ firmwareReported: true, firmware: '2.0.0' }), true],
    ['a first firmware', change({ firmwareReported: true, prevFirmware: null }), true],
  ])('%s: reported %s', (_, c, reported) => {
    expect(firmwareReports([c])).toEqual(
      reported
        ? [{ accountId: 'a1', deviceId: 'd1', serial: 'SN-1', firmware: c.firmware, previous: c.prevFirmware }]
        : [],
    );
  });
});
