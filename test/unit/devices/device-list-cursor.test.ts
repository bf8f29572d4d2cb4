import { describe, it, expect } from 'vitest';
import { deviceListCursor, DEVICE_SORT_FIELDS, type DeviceSort } from '#core/devices/device-list';
import { DomainError } from '#core/shared/errors';

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64url');
const TODAY = {
  code: 'validation_failed',
  message: 'The cursor is not one this list returned.',
  errors: [{ field: 'cursor', message: 'is invalid' }],
};

function refusal(run: () => unknown) {
  try {
    run();
  } catch (error) {
    const e = error as DomainError;
    expect(e).toBeInstanceOf(DomainError);
    return { code: e.code, message: e.message, errors: e.errors };
  }
  throw new Error('the cursor was accepted');
}

const orders: DeviceSort[] = DEVICE_SORT_FIELDS.flatMap((field) =>
  (['asc', 'desc'] as const).map((direction) => ({ field, direction })),
);

describe('device list cursor', () => {
  it('serial ascending keeps its original form s:<serial>', () => {
    expect(deviceListCursor().encode({ serial: 'SN-0001', sortKey: 'SN-0001' })).toBe(b64('s:SN-0001'));
    expect(deviceListCursor({ field: 'serial', direction: 'asc' }).decode(b64('s:SN-0001'))).toEqual({
      serial: 'SN-0001',
      sortKey: 'SN-0001',
    });
  });

  it('other orders carry order, key and serial', () => {
    expect(deviceListCursor({ field: 'name', direction: 'desc' }).encode({ serial: 'SN-1', sortKey: 'lamp 7' })).toBe(
      b64('k:["name","desc","lamp 7","SN-1"]'),
    );
  });

  it.each(orders)('round-trips in $field $direction', (sort) => {
    const codec = deviceListCursor(sort);
    for (const position of [
      { serial: 'SN-1', sortKey: sort.field === 'serial' ? 'SN-1' : '' },
      { serial: 'a.b_c:d-E', sortKey: sort.field === 'serial' ? 'a.b_c:d-E' : 'ünïcode "quoted" \\ key' },
    ]) {
      expect(codec.decode(codec.encode(position))).toEqual(position);
    }
  });

  it.each(orders.filter((o) => !(o.field === 'serial' && o.direction === 'asc')))(
    'refuses a serial-order cursor in $field $direction, and the reverse',
    (sort) => {
      expect(
        refusal(() => deviceListCursor(sort).decode(deviceListCursor().encode({ serial: 'SN-1', sortKey: 'SN-1' }))),
      ).toEqual(TODAY);
      expect(
        refusal(() => deviceListCursor().decode(deviceListCursor(sort).encode({ serial: 'SN-1', sortKey: 'x' }))),
      ).toEqual(TODAY);
    },
  );

  it('refuses a cursor made in another order', () => {
    const name = deviceListCursor({ field: 'name', direction: 'asc' }).encode({ serial: 'SN-1', sortKey: 'lamp' });
    expect(refusal(() => deviceListCursor({ field: 'ip', direction: 'asc' }).decode(name))).toEqual(TODAY);
    expect(refusal(() => deviceListCursor({ field: 'name', direction: 'desc' }).decode(name))).toEqual(TODAY);
  });

  const nameAsc = { field: 'name', direction: 'asc' } as const;
  it.each([
    ['serial order, not base64url', deviceListCursor(), 'zzz'],
    ['serial order, invalid serial', deviceListCursor(), b64('s:has space')],
    ['serial order, serial too long', deviceListCursor(), b64(`s:${'x'.repeat(65)}`)],
    ['serial order, empty serial', deviceListCursor(), b64('s:')],
    ['serial order, no prefix', deviceListCursor(), b64('SN-1')],
    ['keyed order, not JSON', deviceListCursor(nameAsc), b64('k:["name"')],
    ['keyed order, three parts', deviceListCursor(nameAsc), b64('k:["name","asc","x"]')],
    ['keyed order, key not text', deviceListCursor(nameAsc), b64('k:["name","asc",5,"SN-1"]')],
    [
      'keyed order, key over 400 characters',
      deviceListCursor(nameAsc),
      b64(`k:${JSON.stringify(['name', 'asc', 'x'.repeat(401), 'SN-1'])}`),
    ],
    ['keyed order, invalid serial', deviceListCursor(nameAsc), b64('k:["name","asc","x","SN 1"]')],
    ['keyed order, no prefix', deviceListCursor(nameAsc), b64('["name","asc","x","SN-1"]')],
  ])('refuses a tampered cursor (%s) with the error the list always gave', (_, codec, cursor) => {
    expect(refusal(() => codec.decode(cursor))).toEqual(TODAY);
  });
});
