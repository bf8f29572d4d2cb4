import net from 'node:net';
import tls from 'node:tls';
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { Aedes, type AedesOptions, type Client, type PublishPacket, type Subscription } from 'aedes';
import { WebSocketServer, createWebSocketStream } from 'ws';
import type { Logger } from '../../api/src/logger';
import type { Metrics } from '../../api/src/metrics';
import type { DeviceGateway, OtaCommand, OtaDeviceListener } from '../../api/src/domain/devices/device-gateway';
import type { DeviceAuthService, DeviceSession } from '../../api/src/domain/devices/device-auth.service';
import type { PresenceService } from '../../api/src/domain/devices/presence.service';
import type { HeartbeatIngest } from '../../api/src/domain/devices/heartbeat-ingest';
import {
  InProcessDisconnectRequests,
  type DisconnectRequest,
  type DisconnectRequests,
} from '../../api/src/domain/devices/disconnect-requests';
import { LISTEN_BACKLOG } from '../../api/src/listen-backlog';
import { SingleFlightLoop } from '../../api/src/domain/shared/single-flight-loop';
import { topics } from './protocol/topics';
import { publishKindFor, maySubscribe, mayReceive } from './hooks/authorize';
import {
  capSubscribeQos,
  guardStoredSubscriptions,
  removeForeignSubscriptions,
  MAX_GRANTED_QOS,
} from './subscription-guard';
import { assertAedesInternals, clientOf, destroyStore, routeOnlyUnconsumed, sessionStoreOf } from './aedes-internals';
import { makeAuthenticate, makePreConnect } from './hooks/authenticate';
import { HANDLERS } from './handlers/index';
import type { HandlerContext } from './handlers/context';
import { FloodGuard } from './flood-guard';
import { LogThrottle } from './log-throttle';
import { guardPacketSize, MAX_MQTT_PACKET_BYTES } from './packet-size-guard';
import { createIndexedMemoryPersistence } from './retained-index';
import { DELIVERY_CONCURRENCY, PUBLISH_WINDOW } from './broker-limits';
import { ReadyNotifier, type ReadyDevice } from './ready-notifier';
import { forgetDevice } from './forget-device';
import { configPayload, otaCommandPayload } from './device-messages';

export interface DeviceBrokerOptions {
  metrics: Metrics;
  logger: Logger;
  /**
   * How requests to close a device's session reach every process (Redis in cluster mode). The
   * broker asks through it (`disconnect`) and, once started, closes what it holds when asked.
   * Default: this process only.
   */
  disconnects?: DisconnectRequests;
  /** How often online devices past their presence deadline are marked offline (ms). Default 5000. */
  sweepIntervalMs?: number;
  /**
   * Cluster backends (mqemitter-redis, aedes-persistence-redis); in memory when absent.
   * `storedSessions` lists the client ids with stored subscriptions (checked at start).
   */
  backends?: { mq: unknown; persistence: unknown; storedSessions(): Promise<string[]> };
  /**
   * Single process: at start every device recorded online is marked offline (nobody can be
   * connected to a process that just started). In cluster mode other processes hold devices,
   * so this is off and the presence sweep settles what a dead process left behind.
   */
  reconcileAllOnStart?: boolean;
}

/**
 * The domain the broker serves devices with. The domain reaches devices through the broker (it
 * is built over it), so the broker gets this when it starts: no connection is taken before.
 */
export interface DeviceDomain {
  auth: Pick<DeviceAuthService, 'authenticate' | 'authenticateCertificate'>;
  presence: Pick<PresenceService, 'reconcileAfterRestart' | 'sweepTimedOut'>;
  /** Device news, written in batches; started and, after the last device went, flushed by the broker. */
  ingest: HeartbeatIngest;
  /** The OTA engine: ready and heard devices, progress reports (firmware reports come from the ingest). */
  otaListener: OtaDeviceListener;
}

/** Per connection, beside Aedes's own client object. */
interface Connection {
  session: DeviceSession;
  flood: FloodGuard;
  subscribedOta: boolean;
  ready: boolean;
  keepaliveTimedOut: boolean;
  /** The OTA engine was told the device is ready (its `ota` subscription is in place). */
  otaReady: boolean;
  /** What the first heartbeat on this connection said the device runs. */
  firstFirmware: string | null;
  /** Settles once every progress report received so far on this connection is stored (or refused). */
  reportsStored: Promise<unknown> | null;
  /** onDeviceHeard is on its way (`heardSent` once it went out). */
  heardQueued: boolean;
  heardSent: boolean;
}

/**
 * The embedded device broker: Aedes with protocol v1's authentication, ACLs and handlers,
 * listening on TCP and on the HTTP server's `/mqtt` (WebSocket). Device messages are handled
 * in-process on the publish path (`authorizePublish`), never through an MQTT client subscribed
 * to the broker (with many publishers feeding one subscriber, Aedes's queue backs up by seconds). Implements the DeviceGateway seam.
 */
export class DeviceBroker implements DeviceGateway {
  /** Set once started: what the broker serves devices with. */
  private domain: DeviceDomain | undefined;
  private starting = false;
  private stopDisconnects: (() => void) | undefined;
  private readonly disconnects: DisconnectRequests;
  private readonly connections = new WeakMap<Client, Connection>();
  /** The current connection of each serial on this process. */
  private readonly current = new Map<string, Client>();
  /** A newer, authenticated connection that is replacing the current one (MQTT-3.1.4-2 takeover). */
  private readonly takingOver = new Map<string, Client>();
  private readonly dropLog = new LogThrottle();
  private readonly refuseLog = new LogThrottle();
  /** The TCP and TLS listeners (MQTT over WebSocket rides on the HTTP server). */
  private readonly listeners: net.Server[] = [];
  /** Open TCP and TLS sockets, with or without an MQTT session yet (close() ends the stragglers). */
  private readonly sockets = new Set<net.Socket>();
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MQTT_PACKET_BYTES });
  /** Marks devices offline whose heartbeats stopped. */
  private readonly presenceSweeps: SingleFlightLoop;
  private closed = false;
  /** Device publishes already handled in `authorizePublish`: not routed (consumeDeviceReports). */
  private readonly consumed = new WeakSet<PublishPacket>();
  private readonly ready: ReadyNotifier;
  private readonly heard: ReadyNotifier<ReadyDevice & { firmware: string }>;

  private constructor(
    private readonly aedes: Aedes,
    private readonly options: DeviceBrokerOptions,
  ) {
    this.disconnects = options.disconnects ?? new InProcessDisconnectRequests(options.logger);
    const listener = () => this.domain?.otaListener;
    this.ready = new ReadyNotifier(listener, options.logger, (l, device) => l.onDeviceReady(device));
    this.heard = new ReadyNotifier(listener, options.logger, (l, device) => l.onDeviceHeard(device), 'device heard');
    this.presenceSweeps = new SingleFlightLoop({
      round: () => this.sweepPresence(),
      onError: (err) => options.logger.error({ err }, 'presence sweep failed'),
      poll: { everyMs: options.sweepIntervalMs ?? 5000 },
    });
  }

  /** What the broker serves devices with; only reached from connections, which exist once started. */
  private get served(): DeviceDomain {
    if (!this.domain) throw new Error('the device broker is not started');
    return this.domain;
  }

  static async create(options: DeviceBrokerOptions): Promise<DeviceBroker> {
    let self: DeviceBroker | undefined;
    const aedesOptions: AedesOptions = {
      // [MQTT-3.1.3-5] client ids are serials: at most 64 characters.
      maxClientsIdLength: 64,
      concurrency: DELIVERY_CONCURRENCY,
      preConnect: makePreConnect(),
      authenticate: makeAuthenticate({
        auth: {
          authenticate: (input) => self!.served.auth.authenticate(input),
          authenticateCertificate: (input) => self!.served.auth.authenticateCertificate(input),
        },
        onAuthenticated: (client, session) => self!.onAuthenticated(client, session),
        onRefused: (client, reason, serial) => self!.onRefused(client, reason, serial),
        logger: options.logger,
      }),
      authorizePublish: (client, packet, callback) => self!.authorizePublish(client, packet, callback),
      authorizeSubscribe: (client, sub, callback) => self!.authorizeSubscribe(client, sub, callback),
      authorizeForward: (client, packet) => self!.authorizeForward(client, packet),
      ...(options.backends
        ? { mq: options.backends.mq, persistence: options.backends.persistence }
        : { persistence: createIndexedMemoryPersistence() }),
    };
    const aedes = await Aedes.createBroker(aedesOptions);
    assertAedesInternals(aedes, options.backends);
    guardStoredSubscriptions(sessionStoreOf(aedes));
    self = new DeviceBroker(aedes, options);
    self.wire();
    return self;
  }

  /**
   * Serves devices with `domain` from now on: removes foreign filters from a shared session
   * store, marks stale "online" rows offline, then starts flushing, sweeping and closing the
   * sessions other processes ask to close. Listen only after this.
   */
  async start(domain: DeviceDomain): Promise<void> {
    if (this.starting) throw new Error('the device broker is already started');
    this.starting = true;
    if (this.options.backends) {
      const removed = await removeForeignSubscriptions(
        sessionStoreOf(this.aedes),
        await this.options.backends.storedSessions(),
      );
      if (removed)
        this.options.logger.warn({ filters: removed }, "stored subscriptions outside their device's topics removed");
    }
    if (this.options.reconcileAllOnStart ?? true) {
      const count = await domain.presence.reconcileAfterRestart({ onlyNodes: null });
      if (count) this.options.logger.info({ devices: count }, 'devices left online by a previous run marked offline');
    }
    domain.ingest.start();
    // From here on connections are taken (TCP, TLS and /mqtt).
    this.domain = domain;
    this.stopDisconnects = this.disconnects.subscribe((request) => this.closeSessions(request));
    this.presenceSweeps.start();
  }

  /**
   * Marks devices offline whose 3 heartbeat intervals passed (a timer does it too). Resolves once a
   * sweep that started after the call is over, so a test that moved the clock sees its effect.
   */
  sweepNow(): Promise<void> {
    return this.presenceSweeps.settle();
  }

  private async sweepPresence(): Promise<void> {
    const { ingest, presence } = this.served;
    // Pending news first, so a device heard a moment ago is not swept on a stale deadline.
    await ingest.flush();
    for (;;) {
      const { offline, examined } = await presence.sweepTimedOut(5000);
      if (offline) this.options.logger.info({ devices: offline }, 'devices marked offline after 3 missed heartbeats');
      if (examined < 5000) break;
    }
  }

  /** Plain MQTT on `port` (MQTT_PORT). Resolves with the bound port. */
  listenTcp(port: number, host: string): Promise<number> {
    return this.listen(
      net.createServer((socket) => this.accept(socket)),
      { port, host, what: 'MQTT', setting: 'MQTT_PORT' },
    );
  }

  /**
   * MQTT over TLS on `port` (MQTTS_PORT). A client that does not complete a TLS handshake (plain
   * MQTT sent to this port, say) never reaches Aedes. `credentials.attach` keeps the listener on
   * a renewed certificate. Devices may present a client certificate (not required: passwords
   * work here too).
   */
  listenTls(
    port: number,
    host: string,
    credentials: { serverOptions(): tls.TlsOptions; attach(server: tls.Server): void },
  ): Promise<number> {
    const server = tls.createServer(
      { ...credentials.serverOptions(), requestCert: true, rejectUnauthorized: false },
      (socket) => this.accept(socket),
    );
    // A failed handshake is the client's problem (wrong CA, plain text, a scanner): not an error of ours.
    server.on('tlsClientError', (err) => this.options.logger.debug({ err: err.message }, 'MQTTS handshake failed'));
    credentials.attach(server);
    return this.listen(server, { port, host, what: 'MQTTS', setting: 'MQTTS_PORT' });
  }

  private accept(socket: net.Socket): void {
    if (this.closed || !this.domain) {
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.setNoDelay(true);
    this.handle(socket);
  }

  private listen(
    server: net.Server,
    at: { port: number; host: string; what: string; setting: string },
  ): Promise<number> {
    this.listeners.push(server);
    return new Promise((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException) => {
        reject(
          error.code === 'EADDRINUSE'
            ? new Error(
                `${at.what} port ${at.port} on ${at.host} is already in use. Set ${at.setting} to a free port (0 picks any).`,
              )
            : error,
        );
      };
      server.once('error', onError);
      server.listen(at.port, at.host, LISTEN_BACKLOG, () => {
        server.off('error', onError);
        server.on('error', (err) => this.options.logger.error({ err }, `${at.what} listener error`));
        resolve((server.address() as AddressInfo).port);
      });
    });
  }

  /** For the HTTP server's upgrade dispatcher: MQTT over WebSocket on `/mqtt`. */
  readonly handleUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    if (this.closed || !this.domain) {
      socket.destroy();
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const stream = createWebSocketStream(ws);
      stream.on('error', (err) => this.options.logger.debug({ err }, 'MQTT WebSocket stream error'));
      this.handle(stream, req);
    });
  };

  /** A new connection, whatever its transport: Aedes's client with the size and QoS guards on its parser. */
  private handle(stream: Duplex, req?: http.IncomingMessage): void {
    const client = this.aedes.handle(stream, req);
    guardPacketSize(client, this.options.logger);
    capSubscribeQos(client);
  }

  /** Stops listening, disconnects every device (they go offline), and flushes what is pending. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopDisconnects?.();
    this.ready.close();
    this.heard.close();
    await this.presenceSweeps.stop();
    const listenersClosed = Promise.all(
      this.listeners.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
    );
    await new Promise<void>((resolve) => this.aedes.close(() => resolve()));
    // Aedes closes the clients it has; a socket whose CONNECT it had not finished (a device
    // reconnecting at that moment) stayed open, and the listener's close waited for it until
    // the device's own connect timeout gave up: 15 s of a service restart (test/ota).
    for (const socket of this.sockets) socket.destroy();
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
    await listenersClosed;
    if (this.options.backends) await destroyStore(this.options.backends.persistence);
    await this.domain?.ingest.stop();
  }

  /** Readiness: listening and not closed; the detail says how much is connected and pending. */
  async health(): Promise<{ ok: boolean; detail?: string }> {
    const listening = this.listeners.every((server) => server.listening) && !this.closed && !this.aedes.closed;
    return {
      ok: listening,
      detail: `${this.current.size} devices connected, ${this.domain?.ingest.backlog ?? 0} with unwritten news`,
    };
  }

  get connectedCount(): number {
    return this.current.size;
  }

  // --- DeviceGateway -------------------------------------------------------------------------

  /** After close, a no-op: the configuration is in the database for the device's next connection. */
  async publishConfig(serial: string, message: { version: number; config: Record<string, unknown> }): Promise<void> {
    if (this.closed) return;
    await this.publish({
      topic: topics.config(serial),
      payload: JSON.stringify(configPayload(message)),
      qos: 1,
      retain: true,
    });
  }

  async publishOta(serial: string, command: OtaCommand): Promise<void> {
    if (this.closed) throw new Error('the device broker is closed');
    await this.publish({
      topic: topics.ota(serial),
      payload: JSON.stringify(otaCommandPayload(command)),
      qos: 1,
      retain: false,
    });
  }

  /** Every process (this one included, once started) closes the serial's sessions. Returns at once. */
  disconnect(serial: string, reason: string, match?: { certificateFingerprint?: string }): void {
    void this.disconnects.publish({
      serial,
      reason,
      ...(match?.certificateFingerprint !== undefined ? { certificateFingerprint: match.certificateFingerprint } : {}),
    });
  }

  /** Closes the serial's connection on this process; with a fingerprint, only if it authenticated with that certificate. */
  closeSessions(request: DisconnectRequest): void {
    const { serial, reason } = request;
    const client = this.clientById(serial);
    if (!client) return;
    const wanted = request.certificateFingerprint;
    if (wanted !== undefined && this.connections.get(client)?.session.certificateFingerprint !== wanted) return;
    this.options.logger.info({ serial, reason }, 'disconnecting device');
    client.close();
  }

  isConnected(serial: string): boolean {
    return this.current.has(serial);
  }

  heardSinceConnect(serial: string): boolean {
    const client = this.current.get(serial);
    return client !== undefined && this.connections.get(client)?.heardSent === true;
  }

  readonly publishWindow = PUBLISH_WINDOW;

  async forget(serial: string): Promise<void> {
    if (this.closed) return;
    await forgetDevice(this.aedes, serial);
  }

  // --- internals -----------------------------------------------------------------------------

  /**
   * What a device publishes (heartbeat, status, OTA progress, applied configuration) is consumed
   * by its handler in `authorizePublish`, and the topic ACL lets nobody subscribe to it, so Aedes
   * need not route it: matching it against every subscription, the retained store and the offline
   * queues was about a sixth of the broker's CPU per heartbeat (profile of
   * bench/devices-gateway.bench.ts at 10,000 heartbeats/s). The device still gets its PUBACK,
   * which Aedes writes before it publishes.
   */
  private consumeDeviceReports(): void {
    routeOnlyUnconsumed(this.aedes, (packet) => this.consumed.delete(packet));
  }

  private clientById(id: string): Client | undefined {
    return clientOf(this.aedes, id);
  }

  private publish(input: { topic: string; payload: string; qos: 0 | 1; retain: boolean }): Promise<void> {
    const packet: PublishPacket = {
      cmd: 'publish',
      topic: input.topic,
      payload: Buffer.from(input.payload),
      qos: input.qos,
      retain: input.retain,
      dup: false,
    };
    return new Promise((resolve, reject) => this.aedes.publish(packet, (err) => (err ? reject(err) : resolve())));
  }

  private wire(): void {
    const { metrics, logger } = this.options;
    this.consumeDeviceReports();
    this.aedes.on('clientReady', (client) => this.onReady(client));
    this.aedes.on('clientDisconnect', (client) => this.onDisconnect(client));
    this.aedes.on('keepaliveTimeout', (client) => {
      const conn = this.connections.get(client);
      if (conn) conn.keepaliveTimedOut = true;
    });
    this.aedes.on('subscribe', (subs, client) => {
      const conn = this.connections.get(client);
      if (!conn || !conn.ready) return;
      if (subs.some((s) => (s.qos as number) !== 128 && s.topic === topics.ota(conn.session.serial)))
        this.notifyReady(conn);
    });
    this.aedes.on('clientError', (client, err) =>
      logger.debug({ serial: client?.id, err: err.message }, 'MQTT client error'),
    );
    this.aedes.on('connectionError', (_client, err) => logger.debug({ err: err.message }, 'MQTT connection error'));
    metrics.mqttConnectedDevices.set(0);
  }

  private onAuthenticated(client: Client, session: DeviceSession): void {
    this.connections.set(client, {
      session,
      flood: new FloodGuard(),
      subscribedOta: false,
      ready: false,
      keepaliveTimedOut: false,
      otaReady: false,
      firstFirmware: null,
      reportsStored: null,
      heardQueued: false,
      heardSent: false,
    });
    const existing = this.clientById(session.serial);
    if (existing && existing !== client) this.takingOver.set(session.serial, client);
  }

  private onRefused(client: Client, reason: string, serial: string | undefined): void {
    this.options.metrics.mqttConnectionsRefused.inc({ reason });
    const key = `${serial ?? '?'}:${reason}`;
    if (this.refuseLog.shouldLog(key)) {
      const address = (client.conn as { remoteAddress?: string } | undefined)?.remoteAddress;
      this.options.logger.warn({ serial, reason, address }, 'MQTT connection refused');
    }
  }

  private onReady(client: Client): void {
    const conn = this.connections.get(client);
    if (!conn) return;
    const { serial, deviceId, desiredConfigVersion, desiredConfig } = conn.session;
    conn.ready = true;
    if (this.takingOver.get(serial) === client) this.takingOver.delete(serial);
    this.current.set(serial, client);
    this.options.metrics.mqttConnectedDevices.set(this.current.size);
    this.served.ingest.connected(deviceId);
    // Retained configuration: after a restart with in-memory persistence the broker has no
    // retained messages, so the desired one is published again on every connect.
    if (desiredConfigVersion > 0) {
      this.publishConfig(serial, { version: desiredConfigVersion, config: desiredConfig }).catch((err: unknown) =>
        this.options.logger.error({ err, serial }, 'publishing the desired configuration failed'),
      );
    }
    // Published once; not kept for the life of the connection (memory per device matters at 10,000).
    conn.session.desiredConfig = {};
    // A restored persistent session brings its `ota` subscription back without a SUBSCRIBE.
    if (conn.subscribedOta) this.notifyReady(conn);
  }

  private onDisconnect(client: Client): void {
    const conn = this.connections.get(client);
    if (!conn) return;
    const { serial, deviceId } = conn.session;
    if (this.current.get(serial) !== client) return;
    this.current.delete(serial);
    this.options.metrics.mqttConnectedDevices.set(this.current.size);
    if (this.isBeingTakenOver(serial, client)) return;
    this.served.ingest.offline(
      deviceId,
      this.closed ? 'shutdown' : conn.keepaliveTimedOut ? 'keepalive_timeout' : 'disconnected',
    );
  }

  private isBeingTakenOver(serial: string, client: Client): boolean {
    const successor = this.takingOver.get(serial);
    if (!successor || successor === client) return false;
    if (successor.closed) {
      this.takingOver.delete(serial);
      return false;
    }
    return true;
  }

  private notifyReady(conn: Connection): void {
    const { accountId, deviceId, serial } = conn.session;
    conn.otaReady = true;
    this.ready.notify({ accountId, deviceId, serial });
    this.notifyHeard(conn);
  }

  /**
   * Once per connection, when the device is ready and its first heartbeat arrived (whichever
   * comes last), and the progress reports it sent before that heartbeat are stored: only then
   * may the OTA engine re-send what the device has still not answered. A device back from a
   * killed process or a reboot sends the report it kept right after its CONNACK, before its
   * heartbeat; a re-send decided before that report is stored reaches it after it finished the
   * job (test/ota/ota-finished-not-resent.test.ts).
   */
  private notifyHeard(conn: Connection): void {
    if (conn.heardQueued || !conn.otaReady || conn.firstFirmware === null) return;
    conn.heardQueued = true;
    const { accountId, deviceId, serial } = conn.session;
    const firmware = conn.firstFirmware;
    void Promise.resolve(conn.reportsStored).then(() => {
      const client = this.current.get(serial);
      if (this.closed || !client || this.connections.get(client) !== conn) return;
      conn.heardSent = true;
      this.heard.notify({ accountId, deviceId, serial, firmware });
    });
  }

  private authorizePublish(
    client: Client | null,
    packet: PublishPacket,
    callback: (error?: Error | null) => void,
  ): void {
    // Publishes of the service itself do not come through here; a null client is the broker.
    if (!client) return callback(null);
    const conn = this.connections.get(client);
    if (!conn) return callback(new Error('not authorized'));
    const { serial } = conn.session;
    const { metrics } = this.options;
    const kind = publishKindFor(serial, packet.topic);
    // A Last Will is published by the broker on behalf of a connection that is already gone.
    const isWill = client.closed || !client.connected;
    if (!kind) {
      metrics.mqttAuthorizationDenied.inc({ action: 'publish' });
      this.logDrop(
        serial,
        'acl',
        { topic: packet.topic.slice(0, 200) },
        'publish refused by the topic ACL; disconnecting',
      );
      return callback(new Error('publish not authorized'));
    }
    // Devices never get to leave retained messages in the broker.
    packet.retain = false;
    if (!isWill) {
      const verdict = conn.flood.take();
      if (verdict !== 'ok') {
        metrics.mqttMessagesDropped.inc({ kind, reason: 'rate_limited' });
        this.logDrop(
          serial,
          'flood',
          { limit: 'docs/device-protocol.md' },
          verdict === 'disconnect' ? 'device keeps flooding; disconnecting' : 'messages above the rate limit dropped',
        );
        this.consumed.add(packet);
        return callback(verdict === 'disconnect' ? new Error('flooding') : null);
      }
    }
    const { ingest, otaListener } = this.served;
    const ctx: HandlerContext = {
      ingest,
      otaListener,
      logger: this.options.logger,
      isWill,
      isCurrent: () => this.current.get(serial) === client && !this.isBeingTakenOver(serial, client),
    };
    let result;
    try {
      result = HANDLERS[kind](ctx, conn.session, packet.payload as Buffer);
    } catch (err) {
      // Nothing a device sends may crash the process; a handler bug drops the message.
      this.options.logger.error({ err, serial, kind }, 'device message handler failed');
      result = { ok: false as const, reason: 'invalid' as const };
    }
    this.consumed.add(packet);
    if (result.ok) metrics.mqttMessagesAccepted.inc({ kind });
    else {
      metrics.mqttMessagesDropped.inc({ kind, reason: result.reason });
      this.logDrop(
        serial,
        'malformed',
        { kind, reason: result.reason, bytes: (packet.payload as Buffer).length },
        'malformed device message dropped',
      );
    }
    // A device's messages right after its CONNACK may be handled before Aedes marks it connected
    // (isWill is then true): the first heartbeat counts all the same.
    if (result.ok && result.firmware !== undefined && conn.firstFirmware === null) {
      conn.firstFirmware = result.firmware;
      this.notifyHeard(conn);
    }
    if (!result.ok || !result.applied) return callback(null);
    conn.reportsStored = Promise.allSettled([conn.reportsStored, result.applied]).then(() => undefined);
    // No PUBACK for a message the service could not store: the connection closes and the device
    // sends it again on its next one.
    result.applied.then(
      () => callback(null),
      (err: unknown) => {
        this.options.logger.warn(
          { err, serial, kind },
          'device message not stored; closing the connection so the device sends it again',
        );
        callback(new Error('message not stored'));
      },
    );
  }

  private authorizeSubscribe(
    client: Client,
    sub: Subscription,
    callback: (error: Error | null, subscription?: Subscription | null) => void,
  ): void {
    const conn = this.connections.get(client);
    const kind = conn ? maySubscribe(conn.session.serial, sub.topic) : null;
    if (!conn || !kind) {
      this.options.metrics.mqttAuthorizationDenied.inc({ action: 'subscribe' });
      this.logDrop(
        conn?.session.serial ?? client.id,
        'acl-sub',
        { topic: sub.topic.slice(0, 200) },
        'subscription refused by the topic ACL',
      );
      // Deny with a null subscription (SUBACK 0x80). Passing the subscription on with `qos: 128` would GRANT it (test/broker/auth-acl.test.ts).
      return callback(null, null);
    }
    if (kind === 'ota') conn.subscribedOta = true;
    callback(null, { ...sub, qos: Math.min(sub.qos, MAX_GRANTED_QOS) as Subscription['qos'] });
  }

  /**
   * Delivery guard: a device only ever receives its own `ota` and `config` (live, retained or
   * queued), and no OTA command before its connection is ready.
   */
  private authorizeForward<P extends PublishPacket>(client: Client, packet: P): P | null {
    const conn = this.connections.get(client);
    const serial = conn?.session.serial;
    if (serial !== undefined && conn && !conn.ready && packet.topic === topics.ota(serial)) {
      // Aedes replays a persistent session's queued QoS 1 messages while the connection is being
      // set up (before clientReady): a command stored there and never delivered (its publisher
      // was killed between storing and sending it, or the device was away) would reach the
      // device after it carried the job out meanwhile, typically right after the reboot that
      // finished it. Refused here, Aedes removes it from the session; what the device still has
      // to do the OTA engine sends again from PostgreSQL once it has heard from the device.
      this.options.logger.debug({ serial }, 'OTA command replayed from the stored session dropped');
      return null;
    }
    if (serial !== undefined && mayReceive(serial, packet.topic)) return packet;
    this.options.metrics.mqttAuthorizationDenied.inc({ action: 'forward' });
    this.logDrop(
      serial ?? client.id,
      'acl-forward',
      { topic: packet.topic.slice(0, 200) },
      "delivery outside the device's own topics refused",
    );
    return null;
  }

  private logDrop(serial: string, what: string, data: Record<string, unknown>, message: string): void {
    if (this.dropLog.shouldLog(`${serial}:${what}`)) this.options.logger.warn({ serial, ...data }, message);
  }
}
