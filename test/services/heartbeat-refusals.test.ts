import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { ManualClock } from '#core/shared/clock';
import { createLogger } from '#core/logger';
import { HeartbeatIngest } from '#core/devices/heartbeat-ingest';
import { readHeartbeat } from '#protocol/heartbeat-fields';
import { startServiceHarness, type HarnessAccount, type ServiceHarness } from '../helpers/service-harness';
import { ifStarted } from '../helpers/teardown';

/**
 * A heartbeat with invalid fields still counts as heard, its valid fields are recorded, and each
 * refused field (and each dropped message) is counted on the device, batched with the heartbeat
 * writes: over the ingest and the presence service on a database of their own, as the broker
 * hands them what devices send.
 */
describe('heartbeat ingest: partial heartbeats and refusal counts per device', () => {
  let harness: ServiceHarness;
  let account: HarnessAccount;
  let ingest: HeartbeatIngest;
  const clock = new ManualClock(new Date('2026-11-27T10:00:00.000Z'));

  beforeAll(async () => {
    harness = await startServiceHarness({ clock });
    account = await harness.createAccount();
    await harness.services.models.register(account.admin, { name: 'LX-200', description: '' });
    await harness.services.claims.claim(account.admin, { serials: ['HB-1', 'HB-2'], model: 'LX-200' });
    ingest = new HeartbeatIngest({
      presence: harness.services.presence,
      clock,
      logger: createLogger(process.env.TEST_LOG_LEVEL ?? 'silent'),
    });
  });
  afterAll(async () => ifStarted(harness)?.close());

  const idOf = async (serial: string) =>
    (await harness.database.knex('devices').where({ serial }).first<{ id: string }>('id')).id;
  const device = (serial: string) => harness.services.devices.get(account.admin, { serial });
  /** What the broker's heartbeat handler hands the ingest for this payload. */
  const send = async (serial: string, payload: unknown) => {
    const read = readHeartbeat(JSON.stringify(payload));
    if (!read.ok) throw new Error(read.reason);
    ingest.heartbeat(await idOf(serial), read.values, read.refused);
  };

  it('records the valid fields of a heartbeat with invalid ones, moves last_seen, and counts each refused field', async () => {
    await send('HB-1', { firmware: '1.4.2', ip: '10.0.4.17', uptime_s: 60, rssi: -70 });
    await ingest.flush();
    clock.advance(60_000);
    await send('HB-1', { firmware: 'v1.5.0', ip: '2001:db8::17', uptime_s: 1.5, rssi: -61.6 });
    await ingest.flush();
    const d = await device('HB-1');
    expect(d).toMatchObject({
      lastSeen: '2026-11-27T10:01:00.000Z',
      status: 'online',
      // Kept: the last valid version; the invalid one is shown apart.
      firmware: '1.4.2',
      firmwareReportedInvalid: 'v1.5.0',
      ip: '2001:db8::17',
      uptimeS: 60,
      rssi: -62,
      refusedMessages: {},
      lastRefusedMessage: null,
    });
    expect(d.refusedFields).toEqual({
      firmware: { count: 1, reason: 'invalid_format', value: 'v1.5.0', at: '2026-11-27T10:01:00.000Z' },
      uptime_s: { count: 1, reason: 'not_an_integer', value: '1.5', at: '2026-11-27T10:01:00.000Z' },
    });
  });

  it('adds counts across heartbeats of one batch and across batches; the last reason and value win', async () => {
    clock.advance(1000);
    await send('HB-1', { firmware: '1.2.3.4.5' });
    await send('HB-1', { firmware: 140, uptime_s: -5 });
    await ingest.flush();
    clock.advance(1000);
    await send('HB-1', { uptime_s: 'long' });
    await ingest.flush();
    const d = await device('HB-1');
    expect(d.refusedFields).toEqual({
      firmware: { count: 3, reason: 'wrong_type', value: '140', at: '2026-11-27T10:01:01.000Z' },
      uptime_s: { count: 3, reason: 'wrong_type', value: 'long', at: '2026-11-27T10:01:02.000Z' },
    });
    expect(d.firmwareReportedInvalid).toBe('140');
  });

  it('a valid firmware clears the invalid indication, also when both arrive in one batch', async () => {
    await send('HB-1', { firmware: 'v9' });
    await send('HB-1', { firmware: '1.5.0' });
    await ingest.flush();
    expect(await device('HB-1')).toMatchObject({ firmware: '1.5.0', firmwareReportedInvalid: null });
    await send('HB-1', { firmware: '1.5.0' });
    await send('HB-1', { firmware: 'v1.5.0' });
    await ingest.flush();
    expect(await device('HB-1')).toMatchObject({ firmware: '1.5.0', firmwareReportedInvalid: 'v1.5.0' });
  });

  it('counts dropped messages by reason with the last one, without touching presence', async () => {
    const id = await idOf('HB-2');
    ingest.messageRefused(id, { reason: 'topic_not_allowed', topic: 'devices/HB-2/heartbeats' });
    ingest.messageRefused(id, { reason: 'not_json', topic: 'devices/HB-2/heartbeat' });
    await ingest.flush();
    clock.advance(5000);
    ingest.messageRefused(id, { reason: 'topic_not_allowed', topic: `devices/HB-1/${'x'.repeat(300)}` });
    await ingest.flush();
    const d = await device('HB-2');
    expect(d.refusedMessages).toEqual({ topic_not_allowed: 2, not_json: 1 });
    expect(d.lastRefusedMessage).toEqual({
      reason: 'topic_not_allowed',
      topic: `devices/HB-1/${'x'.repeat(187)}`,
      at: '2026-11-27T10:01:07.000Z',
    });
    expect(d).toMatchObject({ lastSeen: null, status: 'offline', refusedFields: {} });
  });

  it('shows the same in the list the REST API renders in SQL', async () => {
    const page = await harness.services.devices.listJson(account.admin, { limit: 10 });
    const rows = page.devices.map((json) => JSON.parse(json) as Record<string, unknown>);
    const one = rows.find((r) => r.serial === 'HB-1')!;
    expect(one).toMatchObject({
      firmware: '1.5.0',
      firmware_reported_invalid: 'v1.5.0',
      refused_messages: {},
      last_refused_message: null,
      refused_fields: { uptime_s: { count: 3, reason: 'wrong_type', value: 'long' } },
    });
    expect(rows.find((r) => r.serial === 'HB-2')).toMatchObject({
      refused_messages: { topic_not_allowed: 2, not_json: 1 },
    });
  });
});
