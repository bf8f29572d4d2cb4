import { createRequire } from 'node:module';
import { Redis, type RedisOptions } from 'ioredis';
import aedesPersistenceRedis from 'aedes-persistence-redis';
import { DEVICE_PUBLISH_KINDS, parseDeviceTopic } from '#protocol/topics';
import { endRedisConnection } from '#core/cluster/redis-connection';
import { DELIVERY_CONCURRENCY } from '../broker-limits';
import { redisEmitterInternals, redisSubscriptionStore, type RedisEmitterInternals } from '../aedes-internals';

const require = createRequire(import.meta.url);
// mqemitter-redis is CommonJS; its prefixing variant is only reachable as a property of the export.
const mqemitterRedis = require('mqemitter-redis') as {
  MQEmitterRedisPrefix: new (
    prefix: string,
    options: RedisOptions & { connectionString?: string; subConn?: Redis; pubConn?: Redis; concurrency?: number },
  ) => { close(cb: () => void): void };
};

/**
 * Cluster mode for the embedded broker: existing engines, not a protocol of our own.
 * `mqemitter-redis` carries every publish between processes (a device on process 2 receives a
 * command published on process 1); `aedes-persistence-redis` shares subscriptions, retained
 * messages (device configuration) and offline QoS 1 queues, so a device that reconnects to
 * another process still gets what was queued for it.
 */
export function createClusterBrokerBackends(input: {
  redisUrl: string;
  prefix: string;
  onError?: (error: Error, what: string) => void;
}): {
  mq: unknown;
  persistence: unknown;
  storedSessions(): Promise<string[]>;
  /** Ends the store's connection; after the broker closed (which closes the emitter). */
  close(): Promise<void>;
} {
  const onError = input.onError ?? (() => undefined);
  const url = new URL(input.redisUrl);
  const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0;
  const redisOptions: RedisOptions = {
    host: url.hostname,
    port: Number(url.port || 6379),
    db: Number.isFinite(db) ? db : 0,
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    // Keep trying through a Redis restart instead of giving up on the connection.
    retryStrategy: (attempt: number) => Math.min(attempt * 200, 2000),
  };
  // The subscriber connection skips ioredis's ready check. Aedes subscribes as soon as it exists
  // (and devices subscribe right after a Redis restart); a SUBSCRIBE written while the
  // connection is still in its "connect" phase puts it in subscriber mode, the ready check's
  // INFO is then refused, and ioredis flushes the pending SUBSCRIBEs with that error. Measured:
  // one process in two started that way and then delivered nothing at all (every device
  // subscription lost while mqemitter-redis believed it held them).
  const subConn = new Redis({ ...redisOptions, enableReadyCheck: false });
  const pubConn = new Redis(redisOptions);
  markFireAndForgetHandled(subConn);
  markFireAndForgetHandled(pubConn);
  const mq = new mqemitterRedis.MQEmitterRedisPrefix(`${input.prefix}:mqtt:`, {
    ...redisOptions,
    subConn,
    pubConn,
    concurrency: DELIVERY_CONCURRENCY,
  });
  // A Redis restart must not crash the process: every connection gets an error listener
  // (ioredis reconnects by itself). Measured: without these, "Unhandled error event" and an
  // uncaught ECONNREFUSED while Redis was down.
  const emitter = redisEmitterInternals(mq);
  emitter.state.on('error', (error) => onError(error, 'mqemitter-redis'));
  keepDeviceReportsLocal(emitter, `${input.prefix}:mqtt:`);
  closeWithoutWaitingForDeadConnections(emitter, [subConn, pubConn]);
  // aedes-persistence-redis names its keys without a prefix (`clients`, `retained`, `client:<id>`):
  // the connection adds ours, so two fleets (or test runs) sharing one Redis never share sessions.
  const conn = new Redis({ ...redisOptions, keyPrefix: `${input.prefix}:aedes:` });
  conn.on('error', (error: Error) => onError(error, 'aedes-persistence-redis'));
  markFireAndForgetHandled(conn);
  const persistence = aedesPersistenceRedis({ ...redisOptions, conn, maxSessionDelivery: 1000 });
  shareConcurrentAddSubscriptions(redisSubscriptionStore(persistence));
  // aedes-persistence-redis keeps the ids of sessions with subscriptions in the set `clients`.
  return {
    mq,
    persistence,
    storedSessions: () => conn.smembers('clients'),
    // Not the store's destroy(): it first unsubscribes through the emitter, closed by then, and
    // waited forever on a connection the close had dropped; the store holds nothing else.
    close: () => endRedisConnection(conn),
  };
}

/**
 * Aedes 1.2 stores the subscriptions of a SUBSCRIBE once per topic in it, each time with the
 * whole list (handlers/subscribe.js `storeSubscriptions`). aedes-persistence-redis then waits for
 * its own `$SYS/sub/add` broadcast under a key made of the client and the first topic, so the
 * second call replaces the first one's waiter and the first never resolves: a persistent
 * session (`clean: false`, protocol v1) SUBSCRIBing to `ota` and `config` together never got
 * its SUBACK. Measured: 0 of 100 devices acknowledged in cluster mode, 100 of 100 with this.
 * Identical calls in flight for one client share one store and one broadcast (half the Redis work).
 */
function shareConcurrentAddSubscriptions(store: ReturnType<typeof redisSubscriptionStore>): void {
  const inFlight = new Map<string, Promise<unknown>>();
  const add = store.addSubscriptions.bind(store);
  store.addSubscriptions = (client, subs, cb) => {
    const key = `${client.id}\u0000${subs.map((s) => `${s.topic}\u0001${s.qos}`).join('\u0000')}`;
    let work = inFlight.get(key);
    if (!work) {
      work = Promise.resolve(add(client, subs)).finally(() => inFlight.delete(key));
      inFlight.set(key, work);
    }
    if (!cb) return work;
    work.then(
      () => cb(null, client),
      (err: unknown) => cb(err instanceof Error ? err : new Error(String(err))),
    );
    return undefined;
  };
}

const DEVICE_REPORTS = new Set<string>(DEVICE_PUBLISH_KINDS);

/**
 * What devices publish (heartbeats, status, OTA progress, applied configuration) is consumed by
 * the process the device is connected to, in its publish hook, and nobody subscribes to it over
 * MQTT (the topic ACL lets a device subscribe to its own `ota` and `config` only). Sending it
 * through Redis would only cost an encode, a Redis round trip and a decode per heartbeat on
 * every process, so it stays in the process; commands and configuration still cross processes.
 */
function keepDeviceReportsLocal(mq: RedisEmitterInternals, prefix: string): void {
  const emit = mq.emit.bind(mq);
  mq.emit = (packet, done) => {
    const parsed = parseDeviceTopic(packet.topic);
    if (parsed && DEVICE_REPORTS.has(parsed.kind)) {
      // Local subscribers were registered under the prefixed topic (MQEmitterRedisPrefix.on).
      mq._emit({ ...packet, topic: prefix + packet.topic }, done);
      return;
    }
    emit(packet, done);
  };
}

/**
 * mqemitter-redis's close QUITs its two connections and waits for each one's 'end', which ioredis
 * never emits for a connection closed while it waits to reconnect: the broker's close, and with
 * it the service's stop, hung for good when it came during a Redis outage or a few seconds after
 * one. Its connections are ended the way the service's own are (endRedisConnection).
 */
function closeWithoutWaitingForDeadConnections(mq: RedisEmitterInternals, connections: Redis[]): void {
  mq.close = (cb = () => undefined) => {
    if (mq.closed || mq.closing) {
      cb();
      return;
    }
    mq.closing = true;
    void Promise.all(connections.map(endRedisConnection)).then(() => mq._close(cb));
  };
}

/**
 * aedes-persistence-redis and mqemitter-redis issue some commands without awaiting them (the Last
 * Will list's LREM/RPUSH, UNSUBSCRIBE with a callback). When the connection closes under one
 * (shutdown, Redis restart) its rejection had no handler: an unhandled rejection, which Node 20
 * treats as a crash (found twice by the suite). Every command promise of these connections gets
 * a handler here; callers that await still see the error.
 */
function markFireAndForgetHandled(conn: Redis): void {
  const target = conn as unknown as { sendCommand: (...args: unknown[]) => unknown };
  const original = target.sendCommand.bind(conn);
  target.sendCommand = (...args: unknown[]) => {
    const result = original(...args);
    if (result instanceof Promise) result.catch(() => undefined);
    return result;
  };
}
