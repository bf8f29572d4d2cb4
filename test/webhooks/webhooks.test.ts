import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { ManualClock } from '#core/shared/clock';
import { appendEvents } from '#core/events/outbox';
import type { NewEvent } from '#core/events/event-types';
import { startReceiver } from './receiver';
import { gql } from '../graphql/graphql-client';
import { ifStarted } from '../helpers/teardown';

/** The receiver's check, written independently of the service's signing code (docs/webhooks.md). */
function verify(header: string, body: string, secret: string): boolean {
  const fields = Object.fromEntries(header.split(',').map((p) => p.split('=') as [string, string]));
  const mac = createHmac('sha256', secret).update(`${fields.t}.${body}`).digest();
  const given = Buffer.from(fields.v1 ?? '', 'hex');
  return given.length === mac.length && timingSafeEqual(given, mac);
}

describe('webhooks', () => {
  const clock = new ManualClock('2026-11-22T08:00:00Z');
  let server: TestServer;
  let account: TestAccount;
  let other: TestAccount;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  const emit = async (events: Array<Omit<NewEvent, 'accountId'> & { accountId?: string }>) => {
    await appendEvents(
      server.service.database.knex,
      clock,
      events.map((e) => ({ accountId: account.accountId, ...e })),
    );
    await server.service.outbox.settle();
    await server.service.webhookWorker.settle();
  };
  /** Moves time forward in steps and lets the worker retry what is due, until `done()` or out of steps. */
  const retryUntil = async (done: () => boolean, stepMs: number, maxSteps: number) => {
    for (let i = 0; i < maxSteps && !done(); i++) {
      clock.advance(stepMs);
      await server.service.webhookWorker.settle();
    }
  };

  beforeAll(async () => {
    server = await startTestServer({ clock });
    account = await server.createAccount();
    other = await server.createAccount();
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await ifStarted(receiver)?.close();
    await ifStarted(server)?.close();
  });

  it('creates an endpoint whose secret is shown once and stored sealed', async () => {
    const created = await account.api.post('/api/v1/webhooks', {
      url: receiver.url,
      event_types: ['device.online', 'device.offline'],
    });
    expect(created.status).toBe(201);
    expect(created.body.secret).toMatch(/^whsec_/);
    expect(created.body.webhook).toMatchObject({
      url: receiver.url,
      enabled: true,
      event_types: ['device.online', 'device.offline'],
    });
    const listed = await account.api.get('/api/v1/webhooks');
    expect(JSON.stringify(listed.body)).not.toContain(created.body.secret);
    const row = await server.service.database.knex('webhooks').where({ id: created.body.webhook.id }).first();
    expect(row.secret_ciphertext).not.toContain(created.body.secret.slice(6));
    await account.api.delete(`/api/v1/webhooks/${created.body.webhook.id}`);
  });

  it('refuses bad input with 422 and changes nothing', async () => {
    for (const body of [
      { url: 'ftp://example.com/x', event_types: ['device.online'] },
      { url: receiver.url, event_types: ['device.updated'] },
      { url: receiver.url, event_types: [] },
      { url: 'not a url', event_types: ['device.online'] },
    ]) {
      const res = await account.api.post('/api/v1/webhooks', body);
      expect(res.status, JSON.stringify(body)).toBe(422);
    }
    expect((await account.api.get('/api/v1/webhooks')).body.webhooks).toHaveLength(0);
  });

  it('names the fields of the REST body in its errors, not those of the domain input', async () => {
    // A repeated event type passes the body's schema; the service refuses it (its `eventTypes`).
    const created = await account.api.post('/api/v1/webhooks', {
      url: receiver.url,
      event_types: ['device.online', 'device.online'],
    });
    expect(created.status).toBe(422);
    expect(created.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(created.body).toMatchObject({ code: 'validation_failed', errors: [{ field: 'event_types' }] });

    const ok = await account.api.post('/api/v1/webhooks', { url: receiver.url, event_types: ['device.online'] });
    expect(ok.status).toBe(201);
    const updated = await account.api.patch(`/api/v1/webhooks/${ok.body.webhook.id}`, {
      event_types: ['device.offline', 'device.offline'],
    });
    expect(updated.status).toBe(422);
    expect(updated.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(updated.body).toMatchObject({ code: 'validation_failed', errors: [{ field: 'event_types' }] });
    expect((await account.api.get(`/api/v1/webhooks/${ok.body.webhook.id}`)).body.webhook.event_types).toEqual([
      'device.online',
    ]);
    await account.api.delete(`/api/v1/webhooks/${ok.body.webhook.id}`);
  });

  it('delivers signed events {id, type, occurred_at, data} and keeps other accounts out', async () => {
    const created = await account.api.post('/api/v1/webhooks', {
      url: receiver.url,
      event_types: ['device.online', 'device.offline'],
    });
    const { secret, webhook } = created.body;
    await emit([
      { type: 'device.online', subject: 'SN-1', data: { serial: 'SN-1' } },
      { type: 'device.updated', subject: 'SN-1', data: { serial: 'SN-1' } },
    ]);
    expect(receiver.received).toHaveLength(1);
    const got = receiver.received[0]!;
    expect(got.json).toMatchObject({ type: 'device.online', data: { serial: 'SN-1' } });
    expect(Object.keys(got.json).sort()).toEqual(['data', 'id', 'occurred_at', 'type']);
    expect(got.headers['fleet-event-id']).toBe(got.json.id);
    expect(verify(String(got.headers['fleet-signature']), got.body, secret)).toBe(true);
    expect(verify(String(got.headers['fleet-signature']), got.body, 'whsec_wrong')).toBe(false);
    const t = Number(/t=(\d+)/.exec(String(got.headers['fleet-signature']))![1]);
    expect(t).toBe(Math.floor(clock.now().getTime() / 1000));

    // Another account's events never reach this endpoint; its ids answer 404 to the other account.
    await emit([{ accountId: other.accountId, type: 'device.online', subject: 'SN-X', data: {} }]);
    expect(receiver.received).toHaveLength(1);
    expect((await other.api.get(`/api/v1/webhooks/${webhook.id}/deliveries`)).status).toBe(404);
    expect((await other.api.delete(`/api/v1/webhooks/${webhook.id}`)).status).toBe(404);
    expect((await other.api.get('/api/v1/webhooks')).body.webhooks).toHaveLength(0);

    const log = await account.api.get(`/api/v1/webhooks/${webhook.id}/deliveries`);
    expect(log.status).toBe(200);
    expect(log.body.deliveries[0]).toMatchObject({
      status: 'delivered',
      attempts: 1,
      last_status_code: 204,
      event_type: 'device.online',
    });
    expect(log.body.deliveries[0].attempt_log[0]).toMatchObject({ status_code: 204 });
    // Time-ordered ids (version 7) for the event and its delivery, rows of logs kept for days.
    const v7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    expect(got.json.id).toMatch(v7);
    expect(log.body.deliveries[0].id).toMatch(v7);

    // Manual redelivery: the same event id again.
    const again = await account.api.post(
      `/api/v1/webhooks/${webhook.id}/deliveries/${log.body.deliveries[0].id}/redeliver`,
    );
    expect(again.status).toBe(202);
    await server.service.webhookWorker.settle();
    expect(receiver.received).toHaveLength(2);
    expect(receiver.received[1]!.json.id).toBe(got.json.id);
    await account.api.delete(`/api/v1/webhooks/${webhook.id}`);
    receiver.received.length = 0;
  });

  it('receiver down, service restarted mid-retry, receiver up: every event arrives, in order per device', async () => {
    const created = await account.api.post('/api/v1/webhooks', {
      url: receiver.url,
      event_types: ['device.online', 'device.offline'],
    });
    const webhookId = created.body.webhook.id;
    receiver.setMode('down');
    const sequence: Array<[string, 'device.online' | 'device.offline']> = [
      ['A', 'device.online'],
      ['B', 'device.online'],
      ['A', 'device.offline'],
      ['C', 'device.online'],
      ['A', 'device.online'],
      ['B', 'device.offline'],
    ];
    for (const [serial, type] of sequence)
      await emit([
        {
          type,
          subject: serial,
          data: { serial, n: sequence.indexOf(sequence.find((s) => s[0] === serial && s[1] === type)!) },
        },
      ]);
    // Only the head of each device's queue was tried: A, B and C once each.
    expect(receiver.failed.map((r) => r.json.data.serial).sort()).toEqual(['A', 'B', 'C']);
    const log = await account.api.get(`/api/v1/webhooks/${webhookId}/deliveries?status=pending`);
    expect(log.body.deliveries).toHaveLength(6);
    const retried = log.body.deliveries.filter((d: { attempts: number }) => d.attempts === 1);
    for (const d of retried) {
      expect(new Date(d.next_attempt_at).getTime() - clock.now().getTime()).toBeLessThanOrEqual(10_000);
      expect(d.last_status_code).toBe(500);
    }

    await retryUntil(() => false, 60_000, 5);
    await server.restart();
    receiver.setMode('up');
    await retryUntil(() => receiver.received.length >= sequence.length, 30 * 60_000, 60);

    const bySerial = (serial: string) =>
      receiver.received.filter((r) => r.json.data.serial === serial).map((r) => r.json.type);
    expect(bySerial('A')).toEqual(['device.online', 'device.offline', 'device.online']);
    expect(bySerial('B')).toEqual(['device.online', 'device.offline']);
    expect(bySerial('C')).toEqual(['device.online']);
    const ids = receiver.received.map((r) => r.json.id);
    expect(new Set(ids).size).toBe(sequence.length);
    const after = await account.api.get(`/api/v1/webhooks/${webhookId}/deliveries`);
    expect(after.body.deliveries.every((d: { status: string }) => d.status === 'delivered')).toBe(true);
    await account.api.delete(`/api/v1/webhooks/${webhookId}`);
    receiver.received.length = 0;
    receiver.failed.length = 0;
  });

  it('keeps retrying for more than 24 hours, then gives up and disables an endpoint failing for 3 days', async () => {
    const created = await account.api.post('/api/v1/webhooks', {
      url: receiver.url,
      event_types: ['allocation.threshold_reached'],
    });
    const webhookId = created.body.webhook.id;
    receiver.setMode('redirect');
    await emit([{ type: 'allocation.threshold_reached', subject: null, data: { kind: 'quota', percent: 80 } }]);
    expect(receiver.failed).toHaveLength(1);
    const first = (await account.api.get(`/api/v1/webhooks/${webhookId}/deliveries`)).body.deliveries[0];
    expect(first.last_error).toMatch(/redirect refused/);

    await retryUntil(() => false, 60 * 60_000, 26);
    const dayLater = (await account.api.get(`/api/v1/webhooks/${webhookId}/deliveries`)).body.deliveries[0];
    expect(dayLater.status).toBe('pending');
    expect(dayLater.attempts).toBeGreaterThan(8);

    await retryUntil(() => false, 6 * 60 * 60_000, 10);
    const webhook = (await account.api.get(`/api/v1/webhooks/${webhookId}`)).body.webhook;
    expect(webhook.enabled).toBe(false);
    expect(webhook.disabled_reason).toMatch(/failed since/);
    const end = (await account.api.get(`/api/v1/webhooks/${webhookId}/deliveries`)).body.deliveries[0];
    expect(end.status).toBe('failed');
    // Re-enabling through PATCH clears the reason; redelivery then works.
    receiver.setMode('up');
    const enabled = await account.api.patch(`/api/v1/webhooks/${webhookId}`, { enabled: true });
    expect(enabled.body.webhook).toMatchObject({ enabled: true, disabled_reason: null, failing_since: null });
    await account.api.post(`/api/v1/webhooks/${webhookId}/deliveries/${end.id}/redeliver`);
    await server.service.webhookWorker.settle();
    expect(receiver.received.at(-1)!.json.type).toBe('allocation.threshold_reached');
    await account.api.delete(`/api/v1/webhooks/${webhookId}`);
  });

  it('is managed through GraphQL with the same results', async () => {
    const created = await gql(
      server.service.httpUrl,
      'mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { secret webhook { id url eventTypes enabled secretPrefix } } }',
      {
        apiKey: account.apiKey,
        variables: { input: { url: receiver.url, eventTypes: ['device.claimed'] } },
      },
    );
    expect(created.body.data.createWebhook.secret).toMatch(/^whsec_/);
    const id = created.body.data.createWebhook.webhook.id;
    await emit([{ type: 'device.claimed', subject: 'SN-9', data: { serial: 'SN-9' } }]);
    const log = await gql(
      server.service.httpUrl,
      'query($id: ID!) { webhookDeliveries(webhookId: $id) { edges { node { status eventType attempts lastStatusCode attemptLog { statusCode durationMs } payload } } pageInfo { hasNextPage } } }',
      {
        apiKey: account.apiKey,
        variables: { id },
      },
    );
    expect(log.body.data.webhookDeliveries.edges[0].node).toMatchObject({
      status: 'delivered',
      eventType: 'device.claimed',
      attempts: 1,
      lastStatusCode: 204,
    });
    const rest = await account.api.get(`/api/v1/webhooks/${id}/deliveries`);
    expect(rest.body.deliveries[0].payload).toEqual(log.body.data.webhookDeliveries.edges[0].node.payload);
    const foreign = await gql(server.service.httpUrl, 'mutation($id: ID!) { deleteWebhook(id: $id) { id } }', {
      apiKey: other.apiKey,
      variables: { id },
    });
    expect(foreign.body.errors[0].extensions.code).toBe('not_found');
    const deleted = await gql(server.service.httpUrl, 'mutation($id: ID!) { deleteWebhook(id: $id) { id } }', {
      apiKey: account.apiKey,
      variables: { id },
    });
    expect(deleted.body.data.deleteWebhook.id).toBe(id);
  });
});
