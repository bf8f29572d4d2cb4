import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { clusterAvailable, startTestCluster, type TestCluster } from '../helpers/cluster';
import { haproxyAvailable, startHaproxy } from '../helpers/haproxy';
import { ApiClient } from '../helpers/api-client';
import { Agent, request } from 'undici';
import { ifStarted } from '../helpers/teardown';

const availability = await clusterAvailable();
const haproxy = haproxyAvailable();
if (!availability.ok) console.log(`load balancer tests skipped: ${availability.why}`);
else if (!haproxy) console.log('load balancer tests skipped: haproxy is not installed (apt-get install haproxy)');

/** The docs/scaling.md recipe, tested: HAProxy (docs/haproxy.cfg) in front of two processes. */
describe.skipIf(!availability.ok || !haproxy)('two processes behind HAProxy', () => {
  let cluster: TestCluster;
  let lb: Awaited<ReturnType<typeof startHaproxy>>;
  let apiKey: string;
  const admin = { email: `lb-${Date.now()}@example.test`, password: 'correct horse battery' };

  beforeAll(async () => {
    cluster = await startTestCluster(2);
    lb = await startHaproxy(cluster.nodes.map((n) => ({ httpPort: n.httpPort, mqttPort: n.mqttPort })));
    const created = await cluster.nodes[0]!.services.accounts.create({
      name: 'LB Co',
      quota: 100,
      budget: 1000,
      currency: 'EUR',
      unitPrice: 1,
      adminEmail: admin.email,
      adminPassword: admin.password,
    });
    apiKey = created.apiKey;
  });
  afterAll(async () => {
    await ifStarted(lb)?.stop();
    await ifStarted(cluster)?.close();
  });

  it('serves the API through the balancer from both processes', async () => {
    const api = new ApiClient(`http://127.0.0.1:${lb.httpPort}`, apiKey);
    const before = await Promise.all(
      cluster.nodes.map(async (n) => (await n.metrics.httpRequests.get()).values.reduce((a, v) => a + v.value, 0)),
    );
    for (let i = 0; i < 10; i++) expect((await api.get('/api/v1/api-keys')).status).toBe(200);
    const after = await Promise.all(
      cluster.nodes.map(async (n) => (await n.metrics.httpRequests.get()).values.reduce((a, v) => a + v.value, 0)),
    );
    // Round robin: both processes answered some of the ten.
    expect(after[0]! - before[0]!).toBeGreaterThan(0);
    expect(after[1]! - before[1]!).toBeGreaterThan(0);
  });

  it('counts login attempts per client address, not per balancer', async () => {
    // Loopback is 127.0.0.0/8: each client connects to HAProxy from an address of its own.
    const login = async (from: string, password: string) => {
      const dispatcher = new Agent({ localAddress: from });
      try {
        const res = await request(`http://127.0.0.1:${lb.httpPort}/api/v1/session`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email: admin.email, password }),
          dispatcher,
        });
        await res.body.dump();
        return res.statusCode;
      } finally {
        await dispatcher.close();
      }
    };
    const guesses: number[] = [];
    for (let i = 0; i < 11; i++) guesses.push(await login('127.0.0.2', `guess ${i}`));
    expect(guesses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(guesses[10]).toBe(429);
    // The owner, elsewhere, is not locked out by the guesser.
    expect(await login('127.0.0.3', admin.password)).toBe(201);
  });

  it('keeps serving when one process stops', async () => {
    await cluster.nodes[1]!.stop();
    const api = new ApiClient(`http://127.0.0.1:${lb.httpPort}`, apiKey);
    // Health checks take the stopped process out within about a second.
    await expect
      .poll(
        async () => {
          const results = await Promise.all(
            Array.from({ length: 4 }, () =>
              api
                .get('/api/v1/api-keys')
                .then((r) => r.status)
                .catch(() => 0),
            ),
          );
          return results.every((s) => s === 200);
        },
        { timeout: 10_000, interval: 500 },
      )
      .toBe(true);
  });
});
