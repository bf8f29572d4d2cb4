import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from 'graphql-ws';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { appendEvents } from '#core/events/outbox';
import { gql, login, wsClient, collect } from './graphql-client';
import { ifStarted } from '../helpers/teardown';

interface Claimed {
  serial: string;
  id: string;
}

describe('GraphQL subscriptions over graphql-ws', () => {
  let server: TestServer;
  let account: TestAccount;
  let other: TestAccount;
  const clients: Client[] = [];
  const devices: Claimed[] = [];
  const open = (options: Parameters<typeof wsClient>[1]) => {
    const client = wsClient(server.service.httpUrl, options);
    clients.push(client);
    return client;
  };
  /** What the broker does when a device connects or drops: the same domain call. */
  const presence = async (deviceId: string, connectivity: 'online' | 'offline') => {
    await server.service.services.presence.applyBatch([
      {
        deviceId,
        seenAt: connectivity === 'online' ? new Date() : null,
        heardAt: connectivity === 'online' ? new Date() : null,
        firmware: null,
        firmwareKey: null,
        ip: connectivity === 'online' ? '10.0.0.7' : null,
        uptimeS: null,
        rssi: null,
        reportedConfigVersion: null,
        connectivity,
        offlineReason: connectivity === 'offline' ? 'disconnected' : null,
      },
    ]);
  };

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    other = await server.createAccount();
    for (const a of [account, other]) await a.api.post('/api/v1/models', { name: 'LX-200' });
    const claim = await account.api.post('/api/v1/devices/claim', { serials: ['SUB-1', 'SUB-2'], model: 'LX-200' });
    expect(claim.status).toBe(201);
    const otherClaim = await other.api.post('/api/v1/devices/claim', { serials: ['OTHER-1'], model: 'LX-200' });
    expect(otherClaim.status).toBe(201);
    const ids = await server.service.database.knex('devices').select('id', 'serial').orderBy('serial');
    devices.push(...(ids as Claimed[]));
  });
  afterAll(async () => {
    for (const c of clients) await c.dispose();
    await ifStarted(server)?.close();
  });
  const idOf = (serial: string) => devices.find((d) => d.serial === serial)!.id;

  it('refuses a connection without valid credentials', async () => {
    const client = open({ apiKey: 'flk_not-a-key' });
    const sub = collect(client, 'subscription { events { id } }');
    await expect(sub.until(() => false, 3000)).rejects.toThrow(/ended/);
    expect(sub.items).toHaveLength(0);
  });

  it('pushes device online/offline within a second, re-read with status, only to the owning account', async () => {
    const mine = collect(
      open({ apiKey: account.apiKey }),
      'subscription { deviceChanged { type occurredAt device { serial status connectivity ip model } } }',
    );
    const filtered = collect(
      open({ apiKey: account.apiKey }),
      'subscription { deviceChanged(filter: { text: "sub-2" }) { type device { serial } } }',
    );
    const theirs = collect(open({ apiKey: other.apiKey }), 'subscription { deviceChanged { type device { serial } } }');
    await new Promise((r) => setTimeout(r, 200)); // subscriptions acknowledged
    const started = Date.now();
    await presence(idOf('SUB-1'), 'online');
    await mine.until(() => mine.items.length >= 1, 1000);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(mine.items[0]).toEqual({
      data: {
        deviceChanged: expect.objectContaining({
          type: 'device.online',
          device: { serial: 'SUB-1', status: 'online', connectivity: 'online', ip: '10.0.0.7', model: 'LX-200' },
        }),
      },
    });
    await presence(idOf('SUB-1'), 'offline');
    await presence(idOf('SUB-2'), 'online');
    await mine.until(() => mine.items.length >= 3, 1000);
    const seen = mine.items.map((i) => {
      const change = (i as { data: { deviceChanged: { type: string; device: { serial: string; status: string } } } })
        .data.deviceChanged;
      return `${change.device.serial}:${change.type}:${change.device.status}`;
    });
    expect(seen).toEqual(['SUB-1:device.online:online', 'SUB-1:device.offline:offline', 'SUB-2:device.online:online']);
    await filtered.until(() => filtered.items.length >= 1, 1000);
    expect(filtered.items).toHaveLength(1);
    // The other account's device changes reach only the other account.
    await presence(idOf('OTHER-1'), 'online');
    await theirs.until(() => theirs.items.length >= 1, 1000);
    await new Promise((r) => setTimeout(r, 300));
    expect(mine.items).toHaveLength(3);
    expect(JSON.stringify(theirs.items)).not.toContain('SUB-');
  });

  it('coalesces fleetSummaryChanged: a burst of changes gives a few summaries with the final counts', async () => {
    const summaries = collect(
      open({ apiKey: account.apiKey }),
      'subscription { fleetSummaryChanged { total online offline } }',
    );
    await new Promise((r) => setTimeout(r, 200));
    for (let i = 0; i < 20; i++) {
      await presence(idOf('SUB-1'), i % 2 === 0 ? 'online' : 'offline');
      await presence(idOf('SUB-2'), i % 2 === 0 ? 'offline' : 'online');
    }
    await presence(idOf('SUB-1'), 'online');
    await presence(idOf('SUB-2'), 'online');
    await summaries.until(() => {
      const last = summaries.items.at(-1) as { data: { fleetSummaryChanged: { online: number } } } | undefined;
      return last?.data.fleetSummaryChanged.online === 2;
    }, 3000);
    expect(summaries.items.length).toBeLessThanOrEqual(8);
    expect(summaries.items.at(-1)).toEqual({ data: { fleetSummaryChanged: { total: 2, online: 2, offline: 0 } } });
  });

  it('streams the account events by type, and a session cookie authenticates the upgrade', async () => {
    const session = await login(server.service.httpUrl, account.adminEmail, account.adminPassword);
    const viaCookie = collect(
      open({ cookie: session.cookie }),
      'subscription { events(types: ["device.claimed"]) { id type subject data } }',
    );
    const foreignOrigin = collect(
      open({ cookie: session.cookie, origin: 'https://evil.example' }),
      'subscription { events { id } }',
    );
    await new Promise((r) => setTimeout(r, 200));
    await account.api.post('/api/v1/devices/claim', { serials: ['SUB-3'], model: 'LX-200' });
    await appendEvents(server.service.database.knex, server.service.clock, [
      { accountId: other.accountId, type: 'device.claimed', subject: 'X', data: {} },
    ]);
    await server.service.outbox.settle();
    await viaCookie.until(() => viaCookie.items.length >= 1, 2000);
    await new Promise((r) => setTimeout(r, 200));
    expect(viaCookie.items).toHaveLength(1);
    expect(viaCookie.items[0]).toMatchObject({
      data: { events: { type: 'device.claimed', subject: 'SUB-3', data: { serial: 'SUB-3' } } },
    });
    // The recent events query returns the same event id.
    const recent = await gql(server.service.httpUrl, '{ events(first: 5, types: ["device.claimed"]) { id subject } }', {
      apiKey: account.apiKey,
    });
    expect(recent.body.data.events[0].id).toBe(
      (viaCookie.items[0] as { data: { events: { id: string } } }).data.events.id,
    );
    // Cross-site WebSocket hijacking: a cookie from another origin is not trusted.
    await expect(foreignOrigin.until(() => false, 2000)).rejects.toThrow(/ended/);
    const bad = collect(open({ apiKey: account.apiKey }), 'subscription { events(types: ["nope"]) { id } }');
    await expect(bad.until(() => false, 2000)).rejects.toThrow(/ended/);
    expect(JSON.stringify([...bad.items, ...bad.errors])).toContain('validation_failed');
  });

  it('closes the subscriptions of a revoked API key at once', async () => {
    const created = await account.api.post('/api/v1/api-keys', { name: 'watcher', role: 'viewer' });
    const sub = collect(open({ apiKey: created.body.secret }), 'subscription { events { id } }');
    await new Promise((r) => setTimeout(r, 200));
    const revoked = await gql(server.service.httpUrl, 'mutation($id: ID!) { revokeApiKey(id: $id) { revokedAt } }', {
      apiKey: account.apiKey,
      variables: { id: created.body.api_key.id },
    });
    expect(revoked.body.data.revokeApiKey.revokedAt).toBeTruthy();
    await expect(sub.until(() => false, 2000)).rejects.toThrow(/ended/);
    expect(JSON.stringify(sub.errors)).toMatch(/4403|revoked/);
  });

  it('pushes deploymentProgress to the owner; another account is told not_found', async () => {
    const form = new FormData();
    form.set('model', 'LX-200');
    form.set('version', '1.1.0');
    form.set('file', new Blob([Buffer.from('firmware 1.1.0')]), 'fw.bin');
    const upload = await fetch(`${server.service.httpUrl}/api/v1/firmware/versions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${account.apiKey}` },
      body: form,
    });
    expect(upload.status).toBe(201);
    const deployed = await gql(
      server.service.httpUrl,
      'mutation { deployFirmware(input: { firmwareVersion: "1.1.0", filter: { model: "LX-200" } }) { id status targetCount active allowedActions updates(first: 1) { edges { node { state final } } } } }',
      { apiKey: account.apiKey },
    );
    expect(deployed.body.errors).toBeUndefined();
    const id = deployed.body.data.deployFirmware.id;
    // The status rules come from the domain: under way, pausable and cancellable, updates not final yet.
    expect(deployed.body.data.deployFirmware).toMatchObject({ active: true, allowedActions: ['pause', 'cancel'] });
    expect(deployed.body.data.deployFirmware.updates.edges[0].node.final).toBe(false);
    const progress = collect<{
      data: { deploymentProgress: { id: string; status: string; counts: { cancelled: number } } };
    }>(
      open({ apiKey: account.apiKey }),
      'subscription($id: ID!) { deploymentProgress(id: $id) { id status active allowedActions progress counts { queued cancelled } } }',
      { id },
    );
    const foreign = collect(
      open({ apiKey: other.apiKey }),
      'subscription($id: ID!) { deploymentProgress(id: $id) { id } }',
      { id },
    );
    await new Promise((r) => setTimeout(r, 200));
    const cancelled = await gql(server.service.httpUrl, 'mutation($id: ID!) { cancelDeployment(id: $id) { status } }', {
      apiKey: account.apiKey,
      variables: { id },
    });
    expect(cancelled.body.data.cancelDeployment.status).toBe('cancelled');
    await progress.until(() => progress.items.some((i) => i.data.deploymentProgress.status === 'cancelled'), 3000);
    expect(progress.items.at(-1)!.data.deploymentProgress).toMatchObject({
      id,
      status: 'cancelled',
      active: false,
      allowedActions: [],
    });
    await expect(foreign.until(() => false, 1500)).rejects.toThrow(/ended/);
    expect(JSON.stringify([...foreign.items, ...foreign.errors])).toContain('not_found');
  });

  it('refuses subscription documents over the limits', async () => {
    const aliases = Array.from({ length: 30 }, (_, i) => `a${i}: events { id }`).join(' ');
    const sub = collect(open({ apiKey: account.apiKey }), `subscription { ${aliases} }`);
    await expect(sub.until(() => false, 2000)).rejects.toThrow(/ended/);
    expect(JSON.stringify(sub.errors)).toContain('query_too_complex');
  });

  it('costs subscription list sizes passed as variables like literals', async () => {
    // One top-level field (subscriptions allow no more), ten aliased histories of $n entries each.
    const histories = Array.from(
      { length: 10 },
      (_, i) => `h${i}: history(first: $n) { edges { node { type data occurredAt } } }`,
    ).join(' ');
    const refused = collect(
      open({ apiKey: account.apiKey }),
      `subscription($n: Int) { deviceChanged { device { ${histories} } } }`,
      { n: 500 },
    );
    await expect(refused.until(() => false, 2000)).rejects.toThrow(/ended/);
    expect(JSON.stringify(refused.errors)).toContain('query_too_complex');
  });
});
