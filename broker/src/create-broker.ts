import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type tls from 'node:tls';
import { Aedes, type AedesOptions, type Client, type PublishPacket } from 'aedes';
import type { DeviceGateway, OtaJob } from '#core/devices/device-gateway';
import {
  InProcessDisconnectRequests,
  type DisconnectRequest,
  type DisconnectRequests,
} from '#core/devices/disconnect-requests';
import { SingleFlightLoop } from '#core/shared/single-flight-loop';
import { topics } from '#protocol/topics';
import { capSubscribeQos, guardStoredSubscriptions, removeForeignSubscriptions } from './subscription-guard';
import { assertAedesInternals, clientOf, routeOnlyUnconsumed, sessionStoreOf } from './aedes-internals';
import { makeAuthenticate, makePreConnect } from './hooks/authenticate';
import { withServedKeepalive } from './keepalive';
import { AuthorizeHooks } from './hooks/authorize-hooks';
import { guardPacketSize } from './packet-size-guard';
import { readWholeBuffer } from './whole-buffer-reads';
import { createIndexedMemoryPersistence } from './retained-index';
import { DELIVERY_CONCURRENCY, PUBLISH_WINDOW } from './broker-limits';
import { forgetDevice } from './forget-device';
import { configPayload, otaCommandPayload } from './device-messages';
import { Connections } from './connections';
import { OtaReadiness } from './ota-readiness';
import { ConfigDelivery } from './config-delivery';
import { CredentialDelivery } from './credential-delivery';
import { DeviceListeners } from './listeners';
import { ConnectionLifecycle } from './connection-lifecycle';

import type { DeviceBrokerOptions, DeviceDomain } from './broker-options';
export type { DeviceBrokerOptions, DeviceDomain } from './broker-options';

/**
 * Devices a presence sweep examines per statement: each examined row comes back to the event loop
 * (parsed, then its history and events written), so a page is kept to what the loop handles in
 * a few milliseconds, as a heartbeat flush is (MAX_FLUSH_ROWS).
 */
const SWEEP_PAGE = 1000;

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
  private readonly connections = new Connections();
  private readonly listeners: DeviceListeners;
  /** Marks devices offline whose heartbeats stopped. */
  private readonly presenceSweeps: SingleFlightLoop;
  private closed = false;
  /** Device publishes already handled in `authorizePublish`: not routed (consumeDeviceReports). */
  private readonly consumed = new WeakSet<PublishPacket>();
  private readonly readiness: OtaReadiness;
  private readonly config: ConfigDelivery;
  private readonly credentials: CredentialDelivery;
  private readonly authorize: AuthorizeHooks;
  private readonly lifecycle: ConnectionLifecycle;

  private constructor(
    private readonly aedes: Aedes,
    private readonly options: DeviceBrokerOptions,
  ) {
    this.disconnects = options.disconnects ?? new InProcessDisconnectRequests(options.logger);
    this.readiness = new OtaReadiness(this.connections, () => this.domain?.otaListener, options.logger);
    this.config = new ConfigDelivery({
      connections: this.connections,
      read: () => {
        const configs = this.domain?.configs;
        return configs ? (session) => configs.desired(session) : undefined;
      },
      publish: (serial, message) => this.publishConfig(serial, message),
      logger: options.logger,
    });
    this.credentials = new CredentialDelivery({
      connections: this.connections,
      rotations: () => this.domain?.rotations,
      metrics: options.metrics,
      logger: options.logger,
    });
    this.authorize = new AuthorizeHooks({
      connections: this.connections,
      served: () => this.served,
      consumed: this.consumed,
      readiness: this.readiness,
      config: this.config,
      credentials: this.credentials,
      metrics: options.metrics,
      logger: options.logger,
    });
    this.lifecycle = new ConnectionLifecycle({
      aedes,
      connections: this.connections,
      readiness: this.readiness,
      config: this.config,
      credentials: this.credentials,
      ingest: () => this.served.ingest,
      closing: () => this.closed,
      metrics: options.metrics,
      logger: options.logger,
    });
    this.listeners = new DeviceListeners({
      logger: options.logger,
      accepting: () => !this.closed && this.domain !== undefined,
      handle: (stream, req) => this.handle(stream, req),
    });
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
    // The hooks reach the broker through `self`, made once Aedes exists: they only run for
    // connections, which come after start().
    const aedesOptions: AedesOptions = {
      // [MQTT-3.1.3-5] client ids are serials: at most 64 characters.
      maxClientsIdLength: 64,
      concurrency: DELIVERY_CONCURRENCY,
      preConnect: withServedKeepalive(makePreConnect(), {
        ...(options.keepaliveMaxS !== undefined ? { maxS: options.keepaliveMaxS } : {}),
        onOutside: (reason) => options.metrics.mqttKeepaliveOutsideRange.inc({ reason }),
      }),
      authenticate: makeAuthenticate({
        auth: {
          authenticate: (input) => self.served.auth.authenticate(input),
          authenticateCertificate: (input) => self.served.auth.authenticateCertificate(input),
        },
        onAuthenticated: (client, session) => self.lifecycle.authenticated(client, session),
        onRefused: (client, reason, serial) => self.lifecycle.refused(client, reason, serial),
        logger: options.logger,
      }),
      authorizePublish: (client, packet, callback) => self.authorize.publish(client, packet, callback),
      authorizeSubscribe: (client, sub, callback) => self.authorize.subscribe(client, sub, callback),
      authorizeForward: (client, packet) => self.authorize.forward(client, packet),
      ...(options.backends
        ? { mq: options.backends.mq, persistence: options.backends.persistence }
        : { persistence: createIndexedMemoryPersistence() }),
    };
    const aedes = await Aedes.createBroker(aedesOptions);
    assertAedesInternals(aedes, options.backends);
    guardStoredSubscriptions(sessionStoreOf(aedes));
    const self = new DeviceBroker(aedes, options);
    self.consumeDeviceReports();
    self.lifecycle.wire();
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
  settlePresenceSweep(): Promise<void> {
    return this.presenceSweeps.settle();
  }

  private async sweepPresence(): Promise<void> {
    const { ingest, presence } = this.served;
    // Pending news first, so a device heard a moment ago is not swept on a stale deadline.
    await ingest.flush();
    for (;;) {
      const { offline, examined } = await presence.sweepTimedOut(SWEEP_PAGE);
      if (offline) this.options.logger.info({ devices: offline }, 'devices marked offline after 3 missed heartbeats');
      if (examined < SWEEP_PAGE) break;
    }
    // Planned credential rotations whose grace period ended: the old credential stops working.
    const rotations = this.served.rotations;
    if (rotations) {
      try {
        const ended = await rotations.expireDue();
        if (ended) this.options.logger.info({ rotations: ended }, 'credential rotations ended by their grace period');
      } catch (err) {
        this.options.logger.error(
          { err },
          'ending credential rotations past their grace period failed; the next sweep tries again',
        );
      }
    }
  }

  /** Plain MQTT on `port` (MQTT_PORT). Resolves with the bound port. */
  listenTcp(port: number, host: string): Promise<number> {
    return this.listeners.listenTcp(port, host);
  }

  /** MQTT over TLS on `port` (MQTTS_PORT); see DeviceListeners.listenTls. Resolves with the bound port. */
  listenTls(
    port: number,
    host: string,
    credentials: { serverOptions(): tls.TlsOptions; attach(server: tls.Server): void },
  ): Promise<number> {
    return this.listeners.listenTls(port, host, credentials);
  }

  /** For the HTTP server's upgrade dispatcher: MQTT over WebSocket on `/mqtt`. */
  get handleUpgrade(): (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void {
    return this.listeners.handleUpgrade;
  }

  /**
   * A connection that reached the broker some other way than its listeners (an in-memory duplex
   * in test/broker's harness): served exactly as a TCP socket is.
   */
  acceptStream(stream: Duplex): void {
    if (this.closed || this.domain === undefined) {
      stream.destroy();
      return;
    }
    this.handle(stream);
  }

  /** A new connection, whatever its transport: Aedes's client with the size and QoS guards on its parser. */
  private handle(stream: Duplex, req?: http.IncomingMessage): void {
    readWholeBuffer(stream);
    const client = this.aedes.handle(stream, req);
    guardPacketSize(client, this.options.logger);
    capSubscribeQos(client);
  }

  /** Stops listening, disconnects every device (they go offline), and flushes what is pending. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopDisconnects?.();
    this.readiness.close();
    await this.presenceSweeps.stop();
    const listenersClosed = this.listeners.stopListening();
    await new Promise<void>((resolve) => this.aedes.close(() => resolve()));
    // Aedes closes the clients it has; a socket whose CONNECT it had not finished (a device
    // reconnecting at that moment) stayed open, and the listener's close waited for it until
    // the device's own connect timeout gave up: 15 s of a service restart (test/ota).
    this.listeners.endConnections();
    await listenersClosed;
    await this.options.backends?.close();
    await this.domain?.ingest.stop();
  }

  /** Readiness: listening and not closed; the detail says how much is connected and pending. */
  health(): Promise<{ ok: boolean; detail?: string }> {
    const listening = this.listeners.listening && !this.closed && !this.aedes.closed;
    return Promise.resolve({
      ok: listening,
      detail: `${this.connections.size} devices connected, ${this.domain?.ingest.backlog ?? 0} with unwritten news`,
    });
  }

  get connectedCount(): number {
    return this.connections.size;
  }

  // --- DeviceGateway -------------------------------------------------------------------------

  /**
   * Not retained: a device gets the desired configuration once on each connection (ConfigDelivery)
   * and this on a change. After close, a no-op: the configuration is in the database for the
   * device's next connection.
   */
  async publishConfig(serial: string, message: { version: number; config: Record<string, unknown> }): Promise<void> {
    if (this.closed) return;
    await this.publish({
      topic: topics.config(serial),
      payload: JSON.stringify(configPayload(message)),
      qos: 1,
      retain: false,
    });
  }

  async publishOta(serial: string, job: OtaJob): Promise<void> {
    if (this.closed) throw new Error('the device broker is closed');
    await this.publish({
      topic: topics.ota(serial),
      payload: JSON.stringify(otaCommandPayload(job)),
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

  /** A planned rotation started: the process holding the device's session delivers it (DeviceGateway). */
  offerCredentials(serial: string): void {
    void this.disconnects.publish({ serial, reason: 'new credentials', action: 'offer_credentials' });
  }

  /**
   * Closes the serial's connection on this process; with a fingerprint, only if it authenticated
   * with that certificate. `action: 'offer_credentials'` closes nothing: the new credentials are
   * delivered to the connection instead.
   */
  closeSessions(request: DisconnectRequest): void {
    const { serial, reason } = request;
    if (request.action === 'offer_credentials') {
      this.credentials.offer(serial);
      return;
    }
    const client = this.clientById(serial);
    if (!client) return;
    const wanted = request.certificateFingerprint;
    if (wanted !== undefined && this.connections.of(client)?.session.certificateFingerprint !== wanted) return;
    this.options.logger.info({ serial, reason }, 'disconnecting device');
    client.close();
  }

  isConnected(serial: string): boolean {
    return this.connections.currentOf(serial) !== undefined;
  }

  readyConnectionOf(serial: string): string | undefined {
    const client = this.connections.currentOf(serial);
    const conn = client === undefined ? undefined : this.connections.of(client);
    return conn?.otaReady ? conn.id : undefined;
  }

  heardSinceConnect(serial: string): boolean {
    const client = this.connections.currentOf(serial);
    return client !== undefined && this.connections.of(client)?.heardSent === true;
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
}
