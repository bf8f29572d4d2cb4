import { describe, expect, it } from 'vitest';
import { mayGetCommandNow, selectForDispatch, type Candidate } from '#core/deployments/dispatch-rules';
import { versionKey } from '#core/shared/version';

let n = 0;
/** A queued update of a device running 1.0.0 to 2.0.0, online, with a binary; `over` changes it. */
function candidate(over: Partial<Candidate> = {}): Candidate {
  n++;
  return {
    id: `job-${n}`,
    accountId: 'acc',
    deviceId: `dev-${n}`,
    deploymentId: 'dep',
    serial: `SN-${n}`,
    targetVersion: '2.0.0',
    fromVersion: '1.0.0',
    firmwareVersionId: 'fw',
    model: 'LX-200',
    sha256: 'ab',
    size: 10,
    storageKey: 'fw/2.0.0',
    signature: null,
    signingKeyId: null,
    firmwareKey: versionKey('1.0.0'),
    online: true,
    desiredConfig: null,
    tags: null,
    ...over,
  };
}

const NOON_UTC = new Date('2024-01-15T12:00:00Z');

describe('dispatch: who may get a command at all', () => {
  it.each([
    ['online, firmware reported', { online: true, firmwareKey: versionKey('1.0.0') }, false, true],
    ['offline, firmware reported', { online: false, firmwareKey: versionKey('1.0.0') }, false, false],
    ['offline but just became ready', { online: false, firmwareKey: versionKey('1.0.0') }, true, true],
    ['online, no heartbeat yet', { online: true, firmwareKey: null }, false, false],
    ['just became ready, no heartbeat yet', { online: true, firmwareKey: null }, true, false],
  ])('%s: %s', (_, over, readyGiven, may) => {
    expect(mayGetCommandNow(candidate(over), readyGiven)).toBe(may);
  });
});

describe('dispatch selection', () => {
  type Row = [
    string,
    Partial<Candidate>,
    { respectMaintenanceWindow?: boolean },
    'already' | 'noFile' | 'send' | 'wait',
  ];
  it.each<Row>([
    ['a device on an older version', {}, {}, 'send'],
    ['a device already on the target', { firmwareKey: versionKey('2.0.0') }, {}, 'already'],
    ['a device on the same version spelled otherwise (2.0 = 2.0.0)', { firmwareKey: versionKey('2.0') }, {}, 'already'],
    ['a device on a newer version (a downgrade is still sent)', { firmwareKey: versionKey('3.0.0') }, {}, 'send'],
    ['a version whose binary was deleted', { storageKey: null }, {}, 'noFile'],
    [
      'already installed wins over a missing binary',
      { firmwareKey: versionKey('2.0.0'), storageKey: null },
      {},
      'already',
    ],
    [
      'outside its window, windows respected',
      { desiredConfig: { timezone: 'UTC', maintenance_window: { start: '02:00', end: '04:00' } } },
      { respectMaintenanceWindow: true },
      'wait',
    ],
    [
      'inside its window, windows respected',
      { desiredConfig: { timezone: 'UTC', maintenance_window: { start: '11:00', end: '13:00' } } },
      { respectMaintenanceWindow: true },
      'send',
    ],
    [
      'outside its window, windows not respected',
      { desiredConfig: { timezone: 'UTC', maintenance_window: { start: '02:00', end: '04:00' } } },
      { respectMaintenanceWindow: false },
      'send',
    ],
    [
      'without a window, windows respected',
      { desiredConfig: { timezone: 'UTC' } },
      { respectMaintenanceWindow: true },
      'send',
    ],
    [
      'outside its window but already installed',
      { firmwareKey: versionKey('2.0.0'), desiredConfig: { maintenance_window: { start: '02:00', end: '04:00' } } },
      { respectMaintenanceWindow: true },
      'already',
    ],
  ])('%s: %s', (_, over, rules, outcome) => {
    const c = candidate(over);
    const s = selectForDispatch([c], {
      now: NOON_UTC,
      respectMaintenanceWindow: rules.respectMaintenanceWindow ?? false,
    });
    const where = s.already.includes(c)
      ? 'already'
      : s.noFile.includes(c)
        ? 'noFile'
        : s.send.includes(c)
          ? 'send'
          : 'wait';
    expect(where).toBe(outcome);
  });

  it.each([
    // [in flight per zone before, zones of the candidates in order, max, the ones sent]
    [{}, ['a', 'a', 'a'], 2, [true, true, false]],
    [{ a: 1 }, ['a', 'a', 'b'], 2, [true, false, true]],
    [{ a: 2, b: 5 }, ['a', 'b', 'c'], 2, [false, false, true]],
    [{ a: 2 }, [undefined, undefined, 'a'], 2, [true, true, false]],
    [{}, ['a', 'b', 'a', 'b', 'a'], 1, [true, true, false, false, false]],
  ] as Array<[Record<string, number>, Array<string | undefined>, number, boolean[]]>)(
    'tag limit: %j in flight, zones %j, max %i',
    (before, zones, max, sent) => {
      const cs = zones.map((zone) => candidate({ tags: zone === undefined ? { other: 'x' } : { zone } }));
      const s = selectForDispatch(cs, {
        now: NOON_UTC,
        respectMaintenanceWindow: false,
        tagLimit: { tag: 'zone', max },
        inFlightPerTag: new Map(Object.entries(before)),
      });
      expect(cs.map((c) => s.send.includes(c))).toEqual(sent);
    },
  );

  it('counts only the devices it sends against the tag limit (waiting and installed ones do not take a place)', () => {
    const window = { timezone: 'UTC', maintenance_window: { start: '02:00', end: '04:00' } };
    const cs = [
      candidate({ tags: { zone: 'a' }, firmwareKey: versionKey('2.0.0') }),
      candidate({ tags: { zone: 'a' }, desiredConfig: window }),
      candidate({ tags: { zone: 'a' }, storageKey: null }),
      candidate({ tags: { zone: 'a' } }),
    ];
    const s = selectForDispatch(cs, {
      now: NOON_UTC,
      respectMaintenanceWindow: true,
      tagLimit: { tag: 'zone', max: 1 },
      inFlightPerTag: new Map(),
    });
    expect(s).toEqual({ already: [cs[0]], noFile: [cs[2]], send: [cs[3]] });
  });

  it('keeps the candidates in order and leaves the counts it was given alone', () => {
    const before = new Map([['a', 0]]);
    const cs = [candidate({ tags: { zone: 'a' } }), candidate(), candidate({ tags: { zone: 'a' } })];
    const s = selectForDispatch(cs, {
      now: NOON_UTC,
      respectMaintenanceWindow: false,
      tagLimit: { tag: 'zone', max: 5 },
      inFlightPerTag: before,
    });
    expect(s.send).toEqual(cs);
    expect(before.get('a')).toBe(0);
  });
});

describe('dispatch: a tag limit on a tag named like an Object.prototype member', () => {
  /** Tags as the server parses a client's JSON: `__proto__` is then an own key. */
  const fromJson = (text: string) => JSON.parse(text) as Record<string, string>;

  it.each(['constructor', 'toString', '__proto__'])(
    'tag %s: devices without it are not limited; devices with it are, per value',
    (tag) => {
      const untagged = [candidate(), candidate({ tags: { site: 'A' } }), candidate()];
      const tagged = [
        candidate({ tags: fromJson(`{${JSON.stringify(tag)}: "x"}`) }),
        candidate({ tags: fromJson(`{${JSON.stringify(tag)}: "x"}`) }),
        candidate({ tags: fromJson(`{${JSON.stringify(tag)}: "y"}`) }),
      ];
      const selection = selectForDispatch([...untagged, ...tagged], {
        now: new Date('2024-01-15T12:00:00Z'),
        respectMaintenanceWindow: false,
        tagLimit: { tag, max: 1 },
      });
      expect(selection.send.map((c) => c.serial)).toEqual([
        ...untagged.map((c) => c.serial),
        tagged[0]!.serial,
        tagged[2]!.serial,
      ]);
    },
  );
});
