import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { gql } from './graphql-client';
import { uploadFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';

interface Connection {
  edges: Array<{ cursor: string; node: Record<string, unknown> }>;
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}

/**
 * Relay paging: the cursor of any edge, passed as `after`, continues right after that edge, in
 * every connection. The deployments list and the webhook delivery log used to hand out row ids
 * as edge cursors, which `after` refused as not a cursor of the list.
 */
describe('GraphQL edge cursors continue after their edge', () => {
  let server: TestServer;
  let account: TestAccount;
  let url: string;
  let deploymentId: string;
  let webhookId: string;

  const ask = async (query: string, variables: Record<string, unknown>) => {
    const res = await gql(url, query, { apiKey: account.apiKey, variables });
    expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
    return res.body.data as Record<string, unknown>;
  };

  /** Pages of 2: the second edge of the first page must be the first edge after the first one's cursor. */
  const expectContinuation = async (pick: (data: Record<string, unknown>) => Connection, query: string) => {
    const first = pick(await ask(query, { first: 2 }));
    expect(first.edges).toHaveLength(2);
    const after = pick(await ask(query, { first: 1, after: first.edges[0]!.cursor }));
    expect(after.edges.map((e) => e.node)).toEqual([first.edges[1]!.node]);
  };

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    url = server.service.httpUrl;
    await account.api.post('/api/v1/models', { name: 'LX-200' });
    await uploadFirmware(account, { model: 'LX-200', version: '1.0.0', expectStatus: 201 });
    const hook = await account.api.post('/api/v1/webhooks', {
      url: 'http://127.0.0.1:9/hook',
      event_types: ['device.claimed'],
    });
    expect(hook.status).toBe(201);
    webhookId = hook.body.webhook.id;
    // Three claims with firmware: three claim deployments, and a device.claimed event per device.
    for (const batch of [['E-1', 'E-2'], ['E-3'], ['E-4']]) {
      const res = await account.api.post('/api/v1/devices/claim', {
        serials: batch,
        model: 'LX-200',
        firmware: '1.0.0',
      });
      expect(res.status).toBe(201);
    }
    await server.service.outbox.settle();
    const listed = await account.api.get('/api/v1/firmware/deployments?limit=10');
    deploymentId = (listed.body.deployments as Array<{ id: string; target_count: number }>).find(
      (d) => d.target_count === 2,
    )!.id;
  }, 60_000);
  afterAll(async () => ifStarted(server)?.close());

  it('deployments', () =>
    expectContinuation(
      (d) => d.deployments as Connection,
      'query($first: Int, $after: String) { deployments(first: $first, after: $after) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }',
    ));

  it("a deployment's devices", () =>
    expectContinuation(
      (d) => (d.deployment as { updates: Connection }).updates,
      `query($first: Int, $after: String) { deployment(id: "${deploymentId}") { updates(first: $first, after: $after) { edges { cursor node { serial } } pageInfo { hasNextPage endCursor } } } }`,
    ));

  it('webhook deliveries', () =>
    expectContinuation(
      (d) => d.webhookDeliveries as Connection,
      `query($first: Int, $after: String) { webhookDeliveries(webhookId: "${webhookId}", first: $first, after: $after) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }`,
    ));

  it('devices and a device history', async () => {
    await expectContinuation(
      (d) => d.devices as Connection,
      'query($first: Int, $after: String) { devices(first: $first, after: $after) { edges { cursor node { serial } } pageInfo { hasNextPage endCursor } } }',
    );
    await account.api.patch('/api/v1/devices/E-1', { name: 'Foyer' });
    await expectContinuation(
      (d) => (d.device as { history: Connection }).history,
      'query($first: Int, $after: String) { device(serial: "E-1") { history(first: $first, after: $after) { edges { cursor node { id type } } pageInfo { hasNextPage endCursor } } } }',
    );
  });
});
