import { PassThrough, type Readable } from 'node:stream';
import type { Aedes, Client, PublishPacket, SubscribePacket } from 'aedes';

/**
 * Every reach into what Aedes 1.2 (and its Redis backends) do not declare in their typings, in
 * one place: the connection parser, the client map, the publish Aedes routes client messages
 * through, the session store, the retained calls of the memory store that retained-index.ts
 * wraps, and the calls of aedes-persistence-redis and mqemitter-redis the cluster glue wraps. The exact aedes version is pinned in package.json;
 * `assertAedesInternals` checks at start that every one of these is where this file expects
 * it, and test/broker/aedes-internals.test.ts fails when an upgrade moves any of them.
 */

/** The aedes release these reaches were written against. */
export const AEDES_VERSION_EXPECTED = '1.2.0';

/** The mqtt-packet parser of a connection: every byte read passes through `parse`, every packet through 'packet'. */
export interface ConnectionParser {
  parse(buf: Buffer): number;
  prependListener(
    event: 'packet',
    listener: (packet: { cmd: string } & Partial<Pick<SubscribePacket, 'subscriptions'>>) => void,
  ): unknown;
}

export function parserOf(client: Client): ConnectionParser | undefined {
  return (client as unknown as { _parser?: ConnectionParser })._parser;
}

/** Aedes keeps its registered clients by id. */
export function clientOf(aedes: Aedes, id: string): Client | undefined {
  return (aedes as unknown as { clients: Record<string, Client | undefined> }).clients[id];
}

export interface StoredSubscription {
  topic: string;
  qos: number;
}

/**
 * The session calls of the store Aedes was given (aedes-persistence in memory,
 * aedes-persistence-redis in cluster mode) that the broker makes itself.
 */
export interface SessionStore {
  addSubscriptions(client: { id: string }, subs: StoredSubscription[]): Promise<unknown>;
  removeSubscriptions(client: { id: string }, topics: string[]): Promise<unknown>;
  subscriptionsByClient(client: { id: string }): Promise<StoredSubscription[] | null | undefined>;
  cleanSubscriptions(client: { id: string }): Promise<unknown>;
  outgoingStream(client: { id: string }): AsyncIterable<PublishPacket>;
  outgoingClearMessageId(client: { id: string }, packet: PublishPacket): Promise<unknown>;
}

const SESSION_CALLS = [
  'addSubscriptions',
  'removeSubscriptions',
  'subscriptionsByClient',
  'cleanSubscriptions',
  'outgoingStream',
  'outgoingClearMessageId',
] as const;

/** The session store Aedes was given; the Aedes typings declare no `persistence`. */
export function sessionStoreOf(aedes: Aedes): SessionStore {
  return (aedes as unknown as { persistence: SessionStore }).persistence;
}

/**
 * Aedes routes what clients publish (and their Last Wills) through `broker.publish(packet,
 * client, done)`; the typings declare only `publish(packet, done)`. Packets for which
 * `consumed(packet)` answers true are acknowledged without being routed; everything else, and
 * every publish of the service itself, is routed as before.
 */
export function routeOnlyUnconsumed(aedes: Aedes, consumed: (packet: PublishPacket) => boolean): void {
  const route = aedes.publish.bind(aedes) as unknown as (
    packet: PublishPacket,
    client: Client | null,
    done?: (error?: Error) => void,
  ) => void;
  const patched = (
    packet: PublishPacket,
    client?: Client | null | ((error?: Error) => void),
    done?: (error?: Error) => void,
  ): void => {
    if (typeof client === 'function') route(packet, null, client);
    else if (consumed(packet)) done?.();
    else route(packet, client ?? null, done);
  };
  (aedes as unknown as { publish: typeof patched }).publish = patched;
}

/** Aedes's own view of a client's granted subscriptions (restored ones included), by filter. */
export function subscribedTo(client: Client, filter: string): boolean {
  const subscriptions = (client as unknown as { subscriptions?: Record<string, unknown> }).subscriptions;
  return subscriptions !== undefined && Object.prototype.hasOwnProperty.call(subscriptions, filter);
}

/**
 * Writes one QoS 1 PUBLISH (not retained, not a duplicate) straight to a connected client's
 * socket: Aedes routes nothing, so nothing is stored anywhere (no retained store, no offline
 * queue of a clean=false session, no in-flight copy in the session store, no Redis in cluster
 * mode). For secrets (credentials rotation): a device that drops before its PUBACK gets the
 * message again from the service on its next connection, never from the broker. The packet id
 * comes from the client's own counter (as Aedes's QoSPacket takes it), so it never collides with
 * one Aedes has in flight; the device's PUBACK is answered by Aedes as for an id it no longer
 * holds (nothing to clear). Returns false when the client is not connected.
 */
export function writeQos1Direct(client: Client, input: { topic: string; payload: Buffer }): boolean {
  const raw = client as unknown as { _nextId: number; conn: { write(chunk: Buffer): boolean; destroyed?: boolean } };
  if (!client.connected || client.closed || raw.conn.destroyed) return false;
  const messageId = raw._nextId;
  raw._nextId = messageId >= 65535 ? 1 : messageId + 1;
  raw.conn.write(encodePublishQos1(input.topic, messageId, input.payload));
  return true;
}

/** A PUBLISH packet [MQTT-3.3]: QoS 1, DUP 0, RETAIN 0, topic, packet identifier, payload. */
export function encodePublishQos1(topic: string, messageId: number, payload: Buffer): Buffer {
  const name = Buffer.from(topic, 'utf8');
  const variable = Buffer.alloc(2 + name.length + 2);
  variable.writeUInt16BE(name.length, 0);
  name.copy(variable, 2);
  variable.writeUInt16BE(messageId, 2 + name.length);
  // Remaining length: 7 bits per byte, high bit set while more follow [MQTT-2.2.3].
  const length: number[] = [];
  let remaining = variable.length + payload.length;
  do {
    let byte = remaining % 128;
    remaining = Math.floor(remaining / 128);
    if (remaining > 0) byte |= 0x80;
    length.push(byte);
  } while (remaining > 0);
  return Buffer.concat([Buffer.from([0x32, ...length]), variable, payload]);
}

/** The retained-message calls of aedes-persistence's memory store that retained-index.ts wraps. */
export interface RetainedStore {
  storeRetained(packet: { topic: string; payload: Buffer | string }, cb?: (err?: Error | null) => void): unknown;
  createRetainedStreamCombi(patterns: string[]): Readable;
}

export function retainedStoreOf(persistence: unknown): RetainedStore {
  return persistence as RetainedStore;
}

/** aedes-persistence-redis's addSubscriptions: a promise without a callback, the callback style with one. */
export interface RedisSubscriptionStore {
  addSubscriptions(
    client: { id: string },
    subs: StoredSubscription[],
    cb?: (err: Error | null, client?: unknown) => void,
  ): Promise<unknown> | undefined;
}

export function redisSubscriptionStore(persistence: unknown): RedisSubscriptionStore {
  return persistence as RedisSubscriptionStore;
}

/** What mqemitter-redis's MQEmitterRedisPrefix has beyond MQEmitter's declared API. */
export interface RedisEmitterInternals {
  emit(packet: { topic: string }, done?: (err?: Error) => void): void;
  /** MQEmitter's own emit (this process's subscribers only), saved by mqemitter-redis. */
  _emit(packet: { topic: string }, done?: (err?: Error) => void): void;
  /** mqemitter-redis re-emits connection errors here; with no listener they would crash the process. */
  state: { on(event: 'error', listener: (error: Error) => void): void };
  /** mqemitter-redis's close: QUITs both connections and waits for their 'end' before `_close`. */
  close(cb?: () => void): void;
  /** MQEmitter's own close (clears this process's subscribers), saved by mqemitter-redis. */
  _close(cb: () => void): void;
  closed: boolean;
  closing?: boolean;
}

export function redisEmitterInternals(mq: unknown): RedisEmitterInternals {
  return mq as RedisEmitterInternals;
}

/**
 * Checks that every reach above finds what it expects on this Aedes instance, its store and
 * (in cluster mode) its emitter; throws naming the installed aedes version when one does not,
 * so an upgrade fails at start instead of silently unguarding the broker.
 */
export function assertAedesInternals(aedes: Aedes, backends?: { mq: unknown; persistence: unknown }): void {
  const missing: string[] = [];
  const raw = aedes as unknown as Record<string, unknown>;
  if (!raw.clients || typeof raw.clients !== 'object') missing.push('aedes.clients (the client map)');
  // publish(packet, client, done): the three-argument form client publishes are routed through.
  if (typeof raw.publish !== 'function' || (raw.publish as (...args: unknown[]) => unknown).length !== 3)
    missing.push('aedes.publish(packet, client, done)');
  const store = raw.persistence as Record<string, unknown> | undefined;
  for (const call of SESSION_CALLS)
    if (typeof store?.[call] !== 'function') missing.push(`aedes.persistence.${call}()`);
  if (!backends)
    for (const call of ['storeRetained', 'createRetainedStreamCombi'])
      if (typeof store?.[call] !== 'function') missing.push(`aedes.persistence.${call}()`);
  // A connection's parser exists from the moment Aedes takes the stream: probed on a stream that
  // is closed at once (it never sends CONNECT, so no hook runs for it).
  const probe = new PassThrough();
  try {
    const client = aedes.handle(probe);
    const parser = parserOf(client);
    if (typeof parser?.parse !== 'function' || typeof parser.prependListener !== 'function')
      missing.push('client._parser (the connection parser)');
    const raw = client as unknown as { _nextId?: unknown; subscriptions?: unknown };
    if (typeof raw._nextId !== 'number') missing.push('client._nextId (the packet id counter)');
    if (typeof raw.subscriptions !== 'object' || raw.subscriptions === null)
      missing.push('client.subscriptions (the granted subscriptions)');
  } finally {
    probe.destroy();
  }
  if (backends) {
    const mq = backends.mq as Partial<RedisEmitterInternals> | undefined;
    if (typeof mq?._emit !== 'function' || typeof mq.state?.on !== 'function')
      missing.push('mqemitter-redis _emit() and state');
    if (typeof mq?._close !== 'function' || typeof mq.closed !== 'boolean')
      missing.push('mqemitter-redis _close() and closed');
    if (typeof (backends.persistence as Partial<RedisSubscriptionStore> | undefined)?.addSubscriptions !== 'function')
      missing.push('aedes-persistence-redis addSubscriptions()');
  }
  if (missing.length > 0) {
    throw new Error(
      `aedes ${typeof raw.version === 'string' ? raw.version : '(unknown version)'} does not have what the device broker reaches into (broker/src/aedes-internals.ts, written for aedes ${AEDES_VERSION_EXPECTED}): ${missing.join(', ')}`,
    );
  }
}
