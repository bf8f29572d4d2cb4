import type { MqttClient } from 'mqtt';
import { topics } from '#protocol/topics';
import { UpdateLock } from '#protocol/lock-payloads';
import { ConfigMessage, OtaCommand, parsePayload } from '#protocol/payloads';
import { OtaJobRunner, type OtaOutcome } from './ota-job-runner';
import { DeviceSecrets } from './device-secrets';
import { sleep } from './sim-helpers';
import { closeDeviceConnection, openDeviceConnection } from './device-connection';
import { LuminaireReporter } from './luminaire-reporter';
import type { SimulatedDeviceOptions } from './simulated-device-options';
import { DEVICE_RECONNECT_POLICY, ReconnectBackoff } from './reconnect-backoff';

export type { OtaOutcome } from './ota-job-runner';

export type { DeviceCredentials } from './device-secrets';

export type { SimulatedDeviceOptions } from './simulated-device-options';

/**
 * One virtual lighting module speaking protocol v1: connects (client id = username = serial,
 * clean false, keepalive 30 s, Last Will offline), heartbeats, applies and reports configuration,
 * performs OTA updates for real (download at a given speed, sha256 check, install, reboot,
 * reconnect on the new version) and flaps its connection on request.
 */
export class SimulatedDevice {
  readonly serial: string;
  firmware: string;
  connected = false;
  /** Heartbeats sent since start. */
  heartbeats = 0;
  /** Heartbeats the broker acknowledged (QoS 1 PUBACK; QoS 0 counts when written). */
  heartbeatsAcked = 0;
  /** When the last heartbeat was published (ms, performance.now()) and its uptime value: lag probes read them. */
  lastHeartbeat: { at: number; uptimeS: number } | null = null;
  /** OTA commands received (repeats included) and when the last one arrived (epoch ms): benchmarks read delivery rates. */
  commandsReceived = 0;
  lastCommandAtMs = 0;
  appliedConfigVersion = 0;
  config: Record<string, unknown> = {};
  private client: MqttClient | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private flapTimer: NodeJS.Timeout | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private rebooting = false;
  private readonly ota: OtaJobRunner;
  /** Its password and certificate, and how it follows a rotation of them. */
  readonly secrets: DeviceSecrets;
  /** Publishes of each connection still waiting for their PUBACK: answered `false` when it closes. */
  private readonly awaitingAck = new WeakMap<MqttClient, Set<(acked: boolean) => void>>();
  private readonly random: () => number;
  private readonly backoff: ReconnectBackoff;
  /** When the current connection got its CONNACK (how long it stayed up decides the next wait). */
  private connectedAt = 0;
  private readonly ip: string;
  private readonly startedAt = Date.now();
  readonly luminaire: LuminaireReporter | null;

  constructor(private readonly options: SimulatedDeviceOptions) {
    this.serial = options.credentials.serial;
    this.secrets = new DeviceSecrets(options.credentials, options.onCredentialsChange);
    this.firmware = options.firmware;
    this.random = options.random ?? Math.random;
    this.backoff = new ReconnectBackoff(options.reconnect ?? DEVICE_RECONNECT_POLICY, this.random);
    const publish = (topic: string, payload: string) => this.publish(topic, payload);
    this.luminaire = LuminaireReporter.of(options.luminaire, {
      serial: this.serial,
      config: () => this.config,
      publish,
      random: this.random,
      firmware: () => this.firmware,
      faults: options.luminaireFaults,
    });
    this.ip = `10.${Math.floor(this.random() * 256)}.${Math.floor(this.random() * 256)}.${1 + Math.floor(this.random() * 254)}`;
    this.ota = new OtaJobRunner(
      {
        firmware: () => this.firmware,
        canPublish: () => this.client?.connected === true,
        isStopped: () => this.isStopped(),
        random: this.random,
        publishReport: (payload) => this.publish(topics.otaProgress(this.serial), payload),
        reboot: (version) => this.reboot(version),
        trace: (direction, topic, payload) => this.trace(direction, topic, payload),
        changed: () => this.options.onChange?.(this),
      },
      options,
    );
  }

  /** An OTA job is running. */
  get updating(): boolean {
    return this.ota.updating;
  }

  get outcomes(): Readonly<Record<OtaOutcome, number>> {
    return this.ota.outcomes;
  }

  /** Performs one OTA job for real; a redelivered job id is not applied twice. */
  runOta(command: OtaCommand): Promise<OtaOutcome | 'duplicate'> {
    return this.ota.run(command);
  }

  /** Connects; resolves on the first CONNACK (rejects when refused). */
  start(): Promise<void> {
    this.stopped = false;
    return this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.clearTimers();
    const client = this.client;
    this.client = undefined;
    if (client) await closeDeviceConnection(client);
    this.setConnected(false);
  }

  /** After a refused or timed-out first connection: keep trying in the background, as a real device would. */
  retryLater(err?: unknown): void {
    if (!this.stopped) this.scheduleReconnect(this.failedAttemptDelay(err));
  }

  /** The wait after an attempt that got no session: CONNACK 3 or none backs off less than a refusal. */
  private failedAttemptDelay(err: unknown): number {
    const code = (err as { code?: unknown } | undefined)?.code;
    return this.backoff.next({ kind: 'failed', connackCode: typeof code === 'number' ? code : undefined });
  }

  /** Drops the connection without DISCONNECT (power cut, Wi-Fi loss): the broker publishes the Last Will. */
  dropConnection(): void {
    this.client?.stream.destroy();
  }

  /**
   * Connects with the secret it holds; on CONNACK 4 tries the other one it may hold (the one
   * before a rotation, once; the password after a certificate) before giving up.
   */
  private async connect(): Promise<void> {
    for (;;) {
      try {
        await this.connectOnce();
        this.secrets.accepted();
        return;
      } catch (err) {
        const code = (err as { code?: number }).code;
        if (this.stopped || !this.secrets.refused(code)) throw err;
        this.trace('!!', 'CONNACK', `${code}: trying the other secret it holds`);
      }
    }
  }

  private connectOnce(): Promise<void> {
    const { credentials } = this.options;
    return new Promise((resolve, reject) => {
      const client = openDeviceConnection({
        brokerUrl: this.options.brokerUrl,
        serial: credentials.serial,
        secret: this.secrets.connectOptions(),
        ca: this.options.ca,
        clean: this.options.clean,
      });
      this.client = client;
      let settled = false;
      client.on('connect', (connack) => {
        settled = true;
        this.connectedAt = Date.now();
        this.setConnected(true);
        this.trace('<-', 'CONNACK', JSON.stringify({ sessionPresent: connack.sessionPresent }));
        if (!connack.sessionPresent) {
          const filters = [topics.ota(this.serial), topics.config(this.serial), topics.credentials(this.serial)];
          client.subscribe(filters, { qos: 1 }, () => undefined);
          this.trace('->', 'SUBSCRIBE', filters.join(', '));
        }
        this.ota.resendUnacknowledged();
        this.sendHeartbeat();
        this.scheduleHeartbeats();
        this.luminaire?.start();
        this.scheduleFlap();
        resolve();
      });
      client.on('message', (topic, payload) => this.onMessage(topic, payload));
      client.on('error', (err) => {
        this.trace('!!', 'error', err.message);
        if (!settled) {
          settled = true;
          client.end(true);
          reject(err);
        }
      });
      client.on('close', () => {
        // mqtt.js keeps QoS 1 publishes for a reconnect this client never makes (reconnectPeriod 0).
        const waiting = this.awaitingAck.get(client);
        this.awaitingAck.delete(client);
        for (const answer of waiting ?? []) answer(false);
        if (this.client !== client) return;
        this.setConnected(false);
        this.clearTimers();
        if (!settled) {
          settled = true;
          reject(new Error(`${this.serial}: connection closed before CONNACK`));
          return;
        }
        if (!this.stopped && !this.rebooting) {
          this.scheduleReconnect(this.backoff.next({ kind: 'lost', upForS: (Date.now() - this.connectedAt) / 1000 }));
        }
      });
    });
  }

  private scheduleReconnect(delayMs: number): void {
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      if (this.stopped) return;
      this.connect().catch((err: unknown) => this.scheduleReconnect(this.failedAttemptDelay(err)));
    }, delayMs);
    this.reconnectTimer.unref();
  }

  /** Changes the heartbeat period (seconds) at once, as a configuration push would (benchmarks: ramp slow, then load). */
  setHeartbeatPeriod(seconds: number): void {
    this.options.heartbeatS = seconds;
    if (this.client?.connected) this.scheduleHeartbeats();
  }

  private heartbeatPeriodMs(): number {
    const configured = typeof this.config.heartbeat_interval_s === 'number' ? this.config.heartbeat_interval_s : 60;
    return (this.options.heartbeatS ?? configured) * 1000;
  }

  private scheduleHeartbeats(): void {
    clearInterval(this.heartbeatTimer);
    const period = this.heartbeatPeriodMs();
    // Jittered start so a fleet does not heartbeat in lockstep. Each heartbeat is due one period
    // after the previous one was due, not after it ran: Node re-arms a setInterval from the time
    // its timer list started, so on a busy event loop 10,000 intervals of 500 ms fired up to 3.8x
    // as often as asked (a benchmark offering 20,000/s sent 77,000/s). A device that fell more
    // than a period behind skips ahead instead of catching up in a burst.
    let due = performance.now() + this.random() * period;
    const tick = () => {
      this.sendHeartbeat();
      const now = performance.now();
      due += period;
      if (due < now - period) due = now + period;
      this.heartbeatTimer = setTimeout(tick, Math.max(0, due - now));
    };
    this.heartbeatTimer = setTimeout(tick, Math.max(0, due - performance.now()));
  }

  private scheduleFlap(): void {
    const perMinute = this.options.flapRate ?? 0;
    if (perMinute <= 0) return;
    clearInterval(this.flapTimer);
    this.flapTimer = setInterval(() => {
      if (!this.updating && this.random() < perMinute / 60) {
        this.trace('!!', 'flap', 'dropping the connection');
        this.dropConnection();
      }
    }, 1000);
  }

  private clearTimers(): void {
    this.luminaire?.stop();
    clearInterval(this.heartbeatTimer);
    clearTimeout(this.heartbeatTimer);
    clearInterval(this.flapTimer);
    clearTimeout(this.reconnectTimer);
  }

  sendHeartbeat(): void {
    if (!this.client?.connected) return;
    // uptime_s only grows, and by at least 1 per heartbeat, so each heartbeat is recognisable in the database.
    const uptimeS = Math.max(Math.floor((Date.now() - this.startedAt) / 1000), (this.lastHeartbeat?.uptimeS ?? -1) + 1);
    const payload = JSON.stringify({
      firmware: this.firmware,
      ip: this.ip,
      uptime_s: uptimeS,
      rssi: -40 - Math.floor(this.random() * 50),
    });
    this.lastHeartbeat = { at: performance.now(), uptimeS };
    this.heartbeats += 1;
    void this.publish(topics.heartbeat(this.serial), payload, this.options.heartbeatQos ?? 1).then(() => {
      this.heartbeatsAcked += 1;
    });
  }

  /** Resolves `true` once the broker acknowledged it, `false` when it was not sent or the connection closed first. */
  private publish(topic: string, payload: string, qos: 0 | 1 = 1): Promise<boolean> {
    const client = this.client;
    if (!client?.connected) return Promise.resolve(false);
    this.trace('->', topic, payload);
    let waiting = this.awaitingAck.get(client);
    if (!waiting) this.awaitingAck.set(client, (waiting = new Set()));
    const pending = waiting;
    return new Promise((resolve) => {
      let answered = false;
      const answer = (acked: boolean) => {
        if (answered) return;
        answered = true;
        pending.delete(answer);
        resolve(acked);
      };
      pending.add(answer);
      client.publish(topic, payload, { qos }, (err) => answer(!err));
    });
  }

  private onMessage(topic: string, payload: Buffer): void {
    if (this.options.trace) this.trace('<-', topic, payload.toString());
    if (topic === topics.config(this.serial)) {
      const parsed = parsePayload(ConfigMessage, payload);
      // Any version other than the one applied last is applied (not only a greater one): the
      // message is always the whole configuration, and a copy of the last one changes nothing.
      if (!parsed.ok || parsed.value.version === this.appliedConfigVersion) return;
      const before = this.heartbeatPeriodMs();
      this.config = parsed.value.config;
      this.appliedConfigVersion = parsed.value.version;
      void this.publish(topics.configReported(this.serial), JSON.stringify({ version: parsed.value.version }));
      if (this.heartbeatPeriodMs() !== before) this.scheduleHeartbeats();
      this.options.onChange?.(this);
    } else if (topic === topics.credentials(this.serial)) {
      void this.onCredentials(payload);
    } else if (topic === topics.ota(this.serial)) {
      this.commandsReceived += 1;
      this.lastCommandAtMs = Date.now();
      const parsed = parsePayload(OtaCommand, payload);
      if (!parsed.ok) return;
      void this.runOta(parsed.value);
    }
  }

  /**
   * New credentials (a planned rotation): stored, acknowledged once the service has the ack
   * (PUBACK), then used: the device reconnects with them. A re-delivery is acknowledged again.
   */
  private async onCredentials(payload: Buffer): Promise<void> {
    const received = this.secrets.receive(payload);
    if (!received) return;
    const acked = await this.publish(topics.credentialsAck(this.serial), received.ack);
    // During an update the new secret waits for the reconnect the update makes anyway.
    if (!acked || !received.reconnect || this.stopped || this.rebooting || this.updating) return;
    await this.reconnectNow();
  }

  /**
   * Asks the service for a new certificate (a renewal; the device must hold one): a new key and
   * a CSR on `csr`. The certificate comes back on `credentials` and is used from the next
   * connection on. False when there is nothing to renew or a renewal is under way.
   */
  async renewCertificate(): Promise<boolean> {
    const request = await this.secrets.renewalRequest();
    if (request === null) return false;
    return this.publish(topics.csr(this.serial), request);
  }

  /**
   * Says "not now" (docs/device-protocol.md "Update locks"): `{for_s, reason}` holds this
   * device's updates for that long, `{release: true}` ends the lock; an emergency fixture
   * reports a completed duration test with reason `emergency_test` and `duration_test_ended_s_ago`.
   * False when it could not be published (not connected).
   */
  lockUpdates(lock: UpdateLock): Promise<boolean> {
    return this.publish(topics.otaLock(this.serial), JSON.stringify(UpdateLock.parse(lock)));
  }

  /** Closes the connection cleanly and connects again at once (new credentials). */
  private async reconnectNow(): Promise<void> {
    const client = this.client;
    this.rebooting = true;
    this.clearTimers();
    if (client) await closeDeviceConnection(client);
    this.setConnected(false);
    this.rebooting = false;
    if (this.stopped) return;
    await this.connect().catch((err: unknown) => this.scheduleReconnect(this.failedAttemptDelay(err)));
  }

  /** Disconnects cleanly, "boots" for a moment, and reconnects running `version`. */
  private async reboot(version: string): Promise<void> {
    this.rebooting = true;
    const client = this.client;
    this.clearTimers();
    await sleep(50);
    if (client) await closeDeviceConnection(client);
    this.setConnected(false);
    await sleep(this.options.rebootMs ?? 1500);
    this.firmware = version;
    this.rebooting = false;
    if (this.stopped) return;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.connect();
        return;
      } catch {
        // Read through a call: stop() may have run while connecting, and TypeScript would keep
        // `this.stopped` narrowed to false from the check above.
        if (this.isStopped()) return;
        await sleep(Math.min(1000 * 2 ** attempt, 10_000));
      }
    }
  }

  private isStopped(): boolean {
    return this.stopped;
  }

  private setConnected(value: boolean): void {
    if (this.connected === value) return;
    this.connected = value;
    this.options.onChange?.(this);
  }

  private trace(direction: string, topic: string, payload: string): void {
    this.options.trace?.(`${new Date().toISOString()} ${this.serial} ${direction} ${topic} ${payload}`);
  }
}
