import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { X509Certificate } from 'node:crypto';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { makeCsr } from '../helpers/certificates';
import { gql } from '../graphql/graphql-client';
import { ifStarted } from '../helpers/teardown';

/**
 * Serials are valid MQTT client ids, and `constructor`, `toString` or `__proto__` are valid
 * serials. The claim's `names` and `csrs` maps are keyed by serial (the client's keys): a lookup
 * must find the map's own entry or nothing, never what Object.prototype has under that name
 * (issue 24, item 4: those claims answered 500, and `__proto__` was claimed named "{}").
 */
describe('claims whose serials are names of Object.prototype members', () => {
  let server: TestServer;
  let a: TestAccount;

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount();
    await buildModel(a, 'LX-200');
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  /** Both adapters claim `__proto__`: each test frees it first (404 when it is not claimed). */
  const freeProtoSerial = async () => {
    const res = await a.api.delete('/api/v1/devices/__proto__');
    expect([204, 200, 404]).toContain(res.status);
  };

  const storedNames = async (serials: string[]) =>
    Object.fromEntries(
      (
        await server.service.database
          .knex('devices')
          .where({ account_id: a.accountId })
          .whereIn('serial', serials)
          .select<Array<{ serial: string; name: string }>>('serial', 'name')
      ).map((d) => [d.serial, d.name]),
    );

  it('REST: each device gets its own entry of `names` and `csrs`, or none; `__proto__` is named "Lobby"', async () => {
    await freeProtoSerial();
    const serials = ['constructor', 'toString', 'valueOf', 'hasOwnProperty', '__proto__'];
    const csr = await makeCsr();
    // Written as JSON text: `__proto__` is then an ordinary key, as any client sends it.
    const body = `{
      "serials": ${JSON.stringify(serials)},
      "model": "LX-200",
      "names": { "__proto__": "Lobby", "valueOf": "Hall 2" },
      "csrs": { "__proto__": ${JSON.stringify(csr.pem)} }
    }`;
    const res = await a.api.request('POST', '/api/v1/devices/claim', {
      rawBody: body,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status, JSON.stringify(res.body).slice(0, 500)).toBe(201);
    expect(res.body.claimed).toBe(5);
    const expected = {
      constructor: 'constructor',
      toString: 'toString',
      valueOf: 'Hall 2',
      hasOwnProperty: 'hasOwnProperty',
      // Computed: a literal `__proto__:` would set the prototype instead of a key.
      ['__proto__']: 'Lobby',
    };
    const answered = Object.fromEntries(
      (res.body.devices as Array<{ serial: string; name: string }>).map((d) => [d.serial, d.name]),
    );
    expect(Object.entries(answered).sort()).toEqual(Object.entries(expected).sort());
    expect(Object.entries(await storedNames(serials)).sort()).toEqual(Object.entries(expected).sort());
    for (const serial of serials) {
      const device = await a.api.get(`/api/v1/devices/${serial}`);
      expect(device.status).toBe(200);
      expect(device.body.name).toBe(Object.entries(expected).find(([s]) => s === serial)![1]);
    }
    // Only `__proto__` had a CSR: one certificate, CN=__proto__.
    const withCertificate = (
      res.body.devices as Array<{ serial: string; certificate?: { certificate: string } }>
    ).filter((d) => d.certificate);
    expect(withCertificate.map((d) => d.serial)).toEqual(['__proto__']);
    expect(new X509Certificate(withCertificate[0]!.certificate!.certificate).subject).toBe('CN=__proto__');
  });

  it('REST: the same Idempotency-Key with another name for `__proto__` is another request (422)', async () => {
    await freeProtoSerial();
    const body = (name: string) =>
      `{ "serials": ["__proto__", "SN-IDEM-PROTO"], "model": "LX-200", "names": { "__proto__": ${JSON.stringify(name)} } }`;
    const send = (name: string) =>
      a.api.request('POST', '/api/v1/devices/claim', {
        rawBody: body(name),
        headers: { 'content-type': 'application/json', 'Idempotency-Key': 'proto-names-1' },
      });
    const first = await send('Lobby');
    expect(first.status, JSON.stringify(first.body).slice(0, 500)).toBe(201);
    expect(first.body.devices.find((d: { serial: string }) => d.serial === '__proto__').name).toBe('Lobby');
    const replay = await send('Lobby');
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const other = await send('Cellar');
    expect(other.status).toBe(422);
    expect(other.body.code).toBe('idempotency_key_reused');
    expect((await a.api.get('/api/v1/devices/__proto__')).body.name).toBe('Lobby');
    await a.api.delete('/api/v1/devices/SN-IDEM-PROTO');
  });

  it('GraphQL: claimDevices with such serials succeeds and each device gets its own name, or none', async () => {
    await freeProtoSerial();
    const serials = ['isPrototypeOf', 'propertyIsEnumerable', 'toLocaleString', '__defineGetter__', '__proto__'];
    const query =
      'mutation($input: ClaimDevicesInput!) { claimDevices(input: $input) { count devices { serial name } } }';
    // Variables as JSON text: `__proto__` is an own key after JSON.parse, as on the server.
    const variables = JSON.parse(`{ "input": {
      "serials": ${JSON.stringify(serials)},
      "model": "LX-200",
      "names": { "__proto__": "Lobby", "toLocaleString": "Hall 7" }
    } }`) as Record<string, unknown>;
    const res = await gql(server.service.httpUrl, query, { apiKey: a.apiKey, variables });
    expect(res.status).toBe(200);
    expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
    expect(res.body.data.claimDevices.count).toBe(5);
    const expected = {
      isPrototypeOf: 'isPrototypeOf',
      propertyIsEnumerable: 'propertyIsEnumerable',
      toLocaleString: 'Hall 7',
      __defineGetter__: '__defineGetter__',
      ['__proto__']: 'Lobby',
    };
    const answered = Object.fromEntries(
      (res.body.data.claimDevices.devices as Array<{ serial: string; name: string }>).map((d) => [d.serial, d.name]),
    );
    expect(Object.entries(answered).sort()).toEqual(Object.entries(expected).sort());
    expect(Object.entries(await storedNames(serials)).sort()).toEqual(Object.entries(expected).sort());
  });

  it('GraphQL: `names` written as a literal in the document works the same', async () => {
    await freeProtoSerial();
    const res = await gql(
      server.service.httpUrl,
      'mutation { claimDevices(input: { serials: ["__proto__", "__lookupSetter__"], model: "LX-200", names: { __proto__: "Lobby" } }) { devices { serial name } } }',
      { apiKey: a.apiKey },
    );
    expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
    expect(
      (res.body.data.claimDevices.devices as Array<{ serial: string; name: string }>).map((d) => [d.serial, d.name]),
    ).toEqual([
      ['__proto__', 'Lobby'],
      ['__lookupSetter__', '__lookupSetter__'],
    ]);
  });
});
