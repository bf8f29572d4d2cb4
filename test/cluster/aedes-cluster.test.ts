import { describe, it, expect, afterAll } from 'vitest';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { Aedes } from 'aedes';
import mqtt from 'mqtt';
import { createClusterBrokerBackends } from '#broker/cluster/aedes-cluster';
import { REDIS_URL, dropRedisKeys } from '../helpers/cluster';
import { PrivateRedis, redisServerAvailable } from '../helpers/redis-server';
import { Redis } from 'ioredis';

const probe = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
probe.on('error', () => undefined);
const redisUp = await probe.connect().then(
  () => true,
  () => false,
);
probe.disconnect();
if (!redisUp) console.log(`aedes cluster tests skipped: no Redis at ${REDIS_URL}`);

describe.skipIf(!redisUp)('two Aedes brokers sharing Redis (cluster backends)', () => {
  const closers: Array<() => Promise<void>> = [];
  const prefixes = new Set<string>();
  afterAll(async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
    for (const prefix of prefixes) await dropRedisKeys(prefix);
  });

  async function broker(prefix: string): Promise<number> {
    prefixes.add(prefix);
    const backends = createClusterBrokerBackends({ redisUrl: REDIS_URL, prefix });
    const aedes = await Aedes.createBroker({ mq: backends.mq, persistence: backends.persistence });
    const server = net.createServer(aedes.handle);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(async () => {
      await new Promise<void>((resolve) => aedes.close(() => resolve()));
      await backends.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    return (server.address() as net.AddressInfo).port;
  }

  it('delivers a publish on one broker to a subscriber on the other, and shares retained messages', async () => {
    const prefix = `t-${randomBytes(4).toString('hex')}`;
    const [p1, p2] = [await broker(prefix), await broker(prefix)];
    const topic = `devices/${prefix}/config`;
    const sub = await mqtt.connectAsync(`mqtt://127.0.0.1:${p2}`, { clientId: `sub-${prefix}` });
    closers.push(() => sub.endAsync());
    await sub.subscribeAsync(`devices/${prefix}/ota`, { qos: 1 });
    const received = new Promise<string>((resolve) =>
      sub.on('message', (t, payload) => t.endsWith('/ota') && resolve(payload.toString())),
    );
    const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${p1}`, { clientId: `pub-${prefix}` });
    closers.push(() => pub.endAsync());
    await pub.publishAsync(`devices/${prefix}/ota`, '{"job_id":"j1"}', { qos: 1 });
    expect(await received).toBe('{"job_id":"j1"}');

    await pub.publishAsync(topic, '{"version":3}', { qos: 1, retain: true });
    const late = await mqtt.connectAsync(`mqtt://127.0.0.1:${p2}`, { clientId: `late-${prefix}` });
    closers.push(() => late.endAsync());
    const retained = new Promise<string>((resolve) => late.on('message', (_t, payload) => resolve(payload.toString())));
    await late.subscribeAsync(topic, { qos: 1 });
    expect(await retained).toBe('{"version":3}');
  });

  it('acknowledges a persistent session subscribing to several topics in one SUBSCRIBE (the device protocol)', async () => {
    const prefix = `t-${randomBytes(4).toString('hex')}`;
    const port = await broker(prefix);
    const device = await mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, {
      clientId: `dev-${prefix}`,
      clean: false,
      reconnectPeriod: 0,
    });
    closers.push(() => device.endAsync(true));
    const granted = await Promise.race([
      device.subscribeAsync([`devices/${prefix}/ota`, `devices/${prefix}/config`], { qos: 1 }),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no SUBACK within 5 s')), 5000)),
    ]);
    expect(granted.map((g) => g.qos)).toEqual([1, 1]);
  });

  it('keeps what devices publish in the process that received it, and sends commands through Redis', async () => {
    const prefix = `t-${randomBytes(4).toString('hex')}`;
    const port = await broker(prefix);
    const watcher = new Redis(REDIS_URL);
    closers.push(() => {
      watcher.disconnect();
      return Promise.resolve();
    });
    const seen: string[] = [];
    watcher.on('pmessage', (_pattern, channel) => seen.push(channel.slice(`${prefix}:mqtt:`.length)));
    await watcher.psubscribe(`${prefix}:mqtt:devices/*`);
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, { clientId: `c-${prefix}` });
    closers.push(() => client.endAsync(true));
    await client.subscribeAsync(`devices/${prefix}/heartbeat`, { qos: 1 });
    const local = new Promise<string>((resolve) => client.on('message', (t) => resolve(t)));
    await client.publishAsync(`devices/${prefix}/heartbeat`, '{"firmware":"1.0.0"}', { qos: 1 });
    // Still delivered inside the process (Aedes's own subscribers work as before)...
    expect(await local).toBe(`devices/${prefix}/heartbeat`);
    await client.publishAsync(`devices/${prefix}/ota`, '{"job_id":"j"}', { qos: 1 });
    await expect.poll(() => seen).toContain(`devices/${prefix}/ota`);
    // ...but never sent through Redis.
    expect(seen).not.toContain(`devices/${prefix}/heartbeat`);
  });

  /**
   * A broker on cluster backends over a private Redis that the test kills; `closeWithin5s` closes
   * the broker and its backends as the service's stop does and says whether that took over 5 s.
   */
  async function brokerOnPrivateRedis(redis: PrivateRedis) {
    await redis.start();
    const backends = createClusterBrokerBackends({
      redisUrl: redis.url,
      prefix: `t-${randomBytes(4).toString('hex')}`,
    });
    const aedes = await Aedes.createBroker({ mq: backends.mq, persistence: backends.persistence });
    const closeWithin5s = (): Promise<string> => {
      const closing = new Promise<void>((resolve) => aedes.close(() => resolve())).then(() => backends.close());
      return Promise.race([
        closing.then(() => 'closed'),
        new Promise<string>((resolve) => setTimeout(() => resolve('still closing after 5 s'), 5000).unref()),
      ]);
    };
    return { closeWithin5s };
  }

  it.skipIf(!redisServerAvailable())('closes while Redis is down', async () => {
    const redis = new PrivateRedis();
    const broker = await brokerOnPrivateRedis(redis);
    await redis.kill();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await broker.closeWithin5s()).toBe('closed');
  });

  it.skipIf(!redisServerAvailable())(
    'closes right after Redis came back, while its connections still wait to reconnect',
    async () => {
      const redis = new PrivateRedis();
      try {
        const broker = await brokerOnPrivateRedis(redis);
        await redis.kill();
        // Down long enough that the next reconnect attempt is over a second away (200, 400, 600... ms).
        await new Promise((resolve) => setTimeout(resolve, 2500));
        await redis.start();
        expect(await broker.closeWithin5s()).toBe('closed');
      } finally {
        await redis.kill();
      }
    },
  );
});
