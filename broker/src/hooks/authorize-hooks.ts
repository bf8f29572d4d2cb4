import type { Client, PublishPacket, Subscription } from 'aedes';
import type { Logger } from '#core/logger';
import type { Metrics } from '#core/metrics';
import { topics, type DevicePublishKind } from '#protocol/topics';
import { HANDLERS } from '../handlers/index';
import type { CredentialRequests, HandlerContext, HandlerResult } from '../handlers/context';
import { LogThrottle } from '../log-throttle';
import { MAX_GRANTED_QOS } from '../subscription-guard';
import type { Connection, Connections } from '../connections';
import type { OtaReadiness } from '../ota-readiness';
import type { ConfigDelivery } from '../config-delivery';
import { RefusedPublishGuard } from '../flood-guard';
import { publishKindFor, publishRefusalOf, maySubscribe, mayReceive } from './authorize';

export interface AuthorizeHooksInput {
  connections: Connections;
  /** The services device messages go to; reached only from connections, which exist once started. */
  served: () => Pick<HandlerContext, 'ingest' | 'otaListener' | 'luminaire'>;
  /** Device publishes handled here: Aedes does not route them (see routeOnlyUnconsumed). */
  consumed: WeakSet<PublishPacket>;
  readiness: Pick<OtaReadiness, 'firstHeartbeat'>;
  /** One copy of each configuration version per connection. */
  config: Pick<ConfigDelivery, 'mayDeliver'>;
  /** Where `credentials/ack` and `csr` messages go. */
  credentials: CredentialRequests;
  metrics: Metrics;
  logger: Logger;
}

type PublishCallback = (error?: Error | null) => void;

/** The device behind a PUBLISH; `kind` null when the topic ACL refused it. */
interface Publisher {
  conn: Connection;
  serial: string;
  kind: DevicePublishKind | null;
  /** A Last Will, published by the broker for a connection that is gone. */
  isWill: boolean;
}

/**
 * Aedes's authorization hooks: what a device may publish (and its message handled right there),
 * subscribe to, and receive. The topic rules themselves are in ./authorize.ts.
 */
export class AuthorizeHooks {
  private readonly dropLog = new LogThrottle();
  /** fleet_mqtt_messages_accepted_total's child per kind: prom-client hashes a label set on every inc. */
  private readonly accepted = new Map<DevicePublishKind, { inc(): void }>();

  constructor(private readonly input: AuthorizeHooksInput) {}

  private acceptedCounter(kind: DevicePublishKind): { inc(): void } {
    let counter = this.accepted.get(kind);
    if (!counter) {
      counter = this.input.metrics.mqttMessagesAccepted.labels({ kind });
      this.accepted.set(kind, counter);
    }
    return counter;
  }

  /**
   * A device's PUBLISH, in the steps Aedes's own publish handling would name: authorize (whose
   * connection, which topic), throttle (the flood limit), handle (the topic's handler, in the
   * process), acknowledge (the PUBACK once what the message changed is stored). `callback(null)`
   * lets Aedes acknowledge; an error closes the connection.
   */
  publish(client: Client | null, packet: PublishPacket, callback: PublishCallback): void {
    // Publishes of the service itself do not come through here; a null client is the broker.
    if (!client) {
      callback(null);
      return;
    }
    const publisher = this.authorize(client, packet);
    if (publisher instanceof Error) {
      callback(publisher);
      return;
    }
    const { kind } = publisher;
    if (kind === null) {
      this.refuse(publisher, packet, callback);
      return;
    }
    // Devices never get to leave retained messages in the broker.
    packet.retain = false;
    const throttled = this.throttle(publisher, kind, packet);
    if (throttled !== 'ok') {
      callback(throttled === 'disconnect' ? new Error('flooding') : null);
      return;
    }
    this.acknowledge(publisher, this.handle(client, publisher, kind, packet), callback);
  }

  /** Whose connection it is and what the topic is for it (`kind` null: the topic ACL refuses it). */
  private authorize(client: Client, packet: PublishPacket): Publisher | Error {
    const conn = this.input.connections.of(client);
    if (!conn) return new Error('not authorized');
    const { serial } = conn.session;
    // A Last Will is published by the broker on behalf of a connection that is already gone.
    return { conn, serial, kind: publishKindFor(serial, packet.topic), isWill: client.closed || !client.connected };
  }

  /**
   * A publish the topic ACL refuses: acknowledged (PUBACK at QoS 1, PUBREC at QoS 2, nothing at
   * QoS 0) and dropped, never routed, counted (per reason, and per device with its topic). Closing
   * the connection without a PUBACK, as before, made a clean=false client send it again after
   * every reconnect, for ever. Only a flood of refusals closes it (RefusedPublishGuard).
   */
  private refuse(publisher: Publisher, packet: PublishPacket, callback: PublishCallback): void {
    const { metrics } = this.input;
    const { conn, serial } = publisher;
    const topic = packet.topic.slice(0, 200);
    packet.retain = false;
    metrics.mqttAuthorizationDenied.inc({ action: 'publish' });
    metrics.mqttPublishesRefused.inc({ reason: publishRefusalOf(serial, packet.topic) });
    this.input.consumed.add(packet);
    this.input.served().ingest.messageRefused(conn.session.deviceId, { reason: 'topic_not_allowed', topic });
    // A refused Last Will counts too: its connection is gone, so closing changes nothing then.
    if ((conn.refusedPublishes ??= new RefusedPublishGuard()).take() === 'close') {
      metrics.mqttFloodDisconnects.inc({ reason: 'refused_publishes' });
      this.logDrop(serial, 'acl-flood', { topic }, 'device keeps publishing outside its topics; disconnecting');
      callback(new Error('too many refused publishes'));
      return;
    }
    this.logDrop(serial, 'acl', { topic }, 'publish refused by the topic ACL; acknowledged and dropped');
    callback(null);
  }

  /** The device's flood limit (a Will is exempt): over it the message is dropped, and a flood disconnects. */
  private throttle(publisher: Publisher, kind: DevicePublishKind, packet: PublishPacket): 'ok' | 'drop' | 'disconnect' {
    if (publisher.isWill) return 'ok';
    const verdict = publisher.conn.flood.take();
    if (verdict === 'ok') return 'ok';
    this.input.metrics.mqttMessagesDropped.inc({ kind, reason: 'rate_limited' });
    this.input
      .served()
      .ingest.messageRefused(publisher.conn.session.deviceId, { reason: 'rate_limited', topic: packet.topic });
    if (verdict === 'disconnect') this.input.metrics.mqttFloodDisconnects.inc({ reason: 'message_rate' });
    this.logDrop(
      publisher.serial,
      'flood',
      { limit: 'docs/device-protocol.md' },
      verdict === 'disconnect' ? 'device keeps flooding; disconnecting' : 'messages above the rate limit dropped',
    );
    this.input.consumed.add(packet);
    return verdict === 'disconnect' ? 'disconnect' : 'drop';
  }

  /** The topic's handler, right here in the process; its outcome counted and, when refused, logged. */
  private handle(client: Client, publisher: Publisher, kind: DevicePublishKind, packet: PublishPacket): HandlerResult {
    const { metrics, logger } = this.input;
    const { serial, isWill, conn } = publisher;
    const ctx = new PublishContext(this.input, this.input.served(), client, serial, isWill, conn.keepaliveTimedOut);
    let result: HandlerResult;
    try {
      result = HANDLERS[kind](ctx, conn.session, packet.payload as Buffer);
    } catch (err) {
      // Nothing a device sends may crash the process; a handler bug drops the message.
      logger.error({ err, serial, kind }, 'device message handler failed');
      result = { ok: false as const, reason: 'invalid' as const };
    }
    this.input.consumed.add(packet);
    if (result.ok) {
      this.acceptedCounter(kind).inc();
      for (const r of result.refusedFields ?? []) {
        metrics.heartbeatFieldsRefused.inc({ field: r.field, reason: r.reason });
        this.logDrop(serial, `field:${r.field}`, { field: r.field, reason: r.reason }, 'heartbeat field refused');
      }
    } else {
      metrics.mqttMessagesDropped.inc({ kind, reason: result.reason });
      ctx.ingest.messageRefused(conn.session.deviceId, { reason: result.reason, topic: packet.topic });
      this.logDrop(
        serial,
        'malformed',
        { kind, reason: result.reason, bytes: (packet.payload as Buffer).length },
        'malformed device message dropped',
      );
    }
    // A device's messages right after its CONNACK may be handled before Aedes marks it connected
    // (isWill is then true): the first heartbeat counts all the same.
    if (result.ok && result.firmware !== undefined) this.input.readiness.firstHeartbeat(conn, result.firmware);
    return result;
  }

  /**
   * The PUBACK: at once for a message that changed nothing to store, once stored otherwise. No
   * PUBACK for a message the service could not store: the connection closes and the device sends
   * it again on its next one.
   */
  private acknowledge(publisher: Publisher, result: HandlerResult, callback: PublishCallback): void {
    if (!result.ok || !result.applied) {
      callback(null);
      return;
    }
    const { conn, serial, kind } = publisher;
    conn.reportsStored = Promise.allSettled([conn.reportsStored, result.applied]).then(() => undefined);
    result.applied.then(
      () => callback(null),
      (err: unknown) => {
        this.input.logger.warn(
          { err, serial, kind },
          'device message not stored; closing the connection so the device sends it again',
        );
        callback(new Error('message not stored'));
      },
    );
  }

  subscribe(
    client: Client,
    sub: Subscription,
    callback: (error: Error | null, subscription?: Subscription | null) => void,
  ): void {
    const conn = this.input.connections.of(client);
    const kind = conn ? maySubscribe(conn.session.serial, sub.topic) : null;
    if (!conn || !kind) {
      this.input.metrics.mqttAuthorizationDenied.inc({ action: 'subscribe' });
      this.logDrop(
        conn?.session.serial ?? client.id,
        'acl-sub',
        { topic: sub.topic.slice(0, 200) },
        'subscription refused by the topic ACL',
      );
      // Deny with a null subscription (SUBACK 0x80). Passing the subscription on with `qos: 128` would GRANT it (test/broker/auth-acl.test.ts).
      callback(null, null);
      return;
    }
    if (kind === 'ota') conn.subscribedOta = true;
    if (kind === 'config') conn.configSubscribed = true;
    callback(null, { ...sub, qos: Math.min(sub.qos, MAX_GRANTED_QOS) as Subscription['qos'] });
  }

  /**
   * Delivery guard: a device only ever receives its own `ota` and `config` (live, retained or
   * queued), no OTA command before its connection is ready, and each configuration version at
   * most once per connection (ConfigDelivery.mayDeliver).
   */
  forward<P extends PublishPacket>(client: Client, packet: P): P | null {
    const conn = this.input.connections.of(client);
    const serial = conn?.session.serial;
    if (serial !== undefined && conn && !conn.ready && packet.topic === topics.ota(serial)) {
      // Aedes replays a persistent session's queued QoS 1 messages while the connection is being
      // set up (before clientReady): a command stored there and never delivered (its publisher
      // was killed between storing and sending it, or the device was away) would reach the
      // device after it carried the job out meanwhile, typically right after the reboot that
      // finished it. Refused here, Aedes removes it from the session; what the device still has
      // to do the OTA engine sends again from PostgreSQL once it has heard from the device.
      this.input.logger.debug({ serial }, 'OTA command replayed from the stored session dropped');
      return null;
    }
    if (serial !== undefined && conn && packet.topic === topics.config(serial))
      return this.input.config.mayDeliver(conn, packet) ? packet : null;
    if (serial !== undefined && mayReceive(serial, packet.topic)) return packet;
    this.input.metrics.mqttAuthorizationDenied.inc({ action: 'forward' });
    this.logDrop(
      serial ?? client.id,
      'acl-forward',
      { topic: packet.topic.slice(0, 200) },
      "delivery outside the device's own topics refused",
    );
    return null;
  }

  private logDrop(serial: string, what: string, data: Record<string, unknown>, message: string): void {
    if (this.dropLog.shouldLog(`${serial}:${what}`)) this.input.logger.warn({ serial, ...data }, message);
  }
}

/**
 * What a topic handler gets for one message: a class rather than an object literal with a
 * closure, so the publish path allocates one small object per message and no function.
 */
class PublishContext implements HandlerContext {
  readonly ingest: HandlerContext['ingest'];
  readonly otaListener: HandlerContext['otaListener'];
  readonly luminaire: HandlerContext['luminaire'];
  readonly logger: Logger;
  readonly credentials: CredentialRequests;

  constructor(
    private readonly input: Pick<AuthorizeHooksInput, 'connections' | 'logger' | 'credentials'>,
    served: Pick<HandlerContext, 'ingest' | 'otaListener' | 'luminaire'>,
    private readonly client: Client,
    private readonly serial: string,
    readonly isWill: boolean,
    readonly keepaliveTimedOut: boolean,
  ) {
    this.ingest = served.ingest;
    this.otaListener = served.otaListener;
    this.luminaire = served.luminaire;
    this.logger = input.logger;
    this.credentials = input.credentials;
  }

  isCurrent(): boolean {
    return this.input.connections.isCurrent(this.serial, this.client);
  }
}
