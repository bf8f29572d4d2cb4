import type { Aedes, Client, SubscribePacket } from 'aedes';

/**
 * Every reach into what Aedes 1.2 does not declare in its typings, in one place: the exact
 * aedes version is pinned in package.json, and test/broker/aedes-internals.test.ts fails when
 * an upgrade moves any of these.
 */

/** The mqtt-packet parser of a connection: every byte read passes through `parse`, every packet through 'packet'. */
export interface ConnectionParser {
  parse(buf: Buffer): number;
  prependListener(event: 'packet', listener: (packet: { cmd: string } & Partial<Pick<SubscribePacket, 'subscriptions'>>) => void): unknown;
}

export function parserOf(client: Client): ConnectionParser | undefined {
  return (client as unknown as { _parser?: ConnectionParser })._parser;
}

/** Aedes keeps its registered clients by id. */
export function clientOf(aedes: Aedes, id: string): Client | undefined {
  return (aedes as unknown as { clients: Record<string, Client | undefined> }).clients[id];
}

/** The session store Aedes was given (memory or Redis); `unknown` until a caller names the calls it uses. */
export function persistenceOf(aedes: Aedes): unknown {
  return (aedes as unknown as { persistence: unknown }).persistence;
}
