import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { SimulatedDevice, type DeviceCredentials, type SimulatedDeviceOptions } from './simulated-device';
import { makeKeyAndCsr, type DeviceKeyAndCsr } from './device-certificates';
import { failingDriverSerials } from './luminaire-faults';

export type { DeviceCredentials } from './simulated-device';

export interface FleetOptions extends Omit<SimulatedDeviceOptions, 'credentials' | 'onChange' | 'downloadGate'> {
  devices: DeviceCredentials[];
  /** New connections started per second (a reconnect storm has a shape too). Default 1000. */
  connectRatePerS?: number;
  /** Connections in flight at once. Default 500. */
  maxPendingConnects?: number;
  /** Share (0..1) of the devices whose driver degrades and fails (`--failing-drivers`), chosen by serial. */
  failingDrivers?: number;
}

export interface FleetStats {
  total: number;
  connected: number;
  /** Connected and heartbeating. */
  online: number;
  updating: number;
  succeeded: number;
  failed: number;
  rolledBack: number;
  heartbeats: number;
  heartbeatsAcked: number;
  connectFailures: number;
  /** OTA commands received, and the earliest and latest of the devices' last command arrivals (epoch ms; 0 before any). */
  commandsReceived: number;
  lastCommandAtMs: { first: number; last: number };
}

/**
 * A fleet of simulated devices in one process: the engine behind `npm run simulator`, and what
 * tests and benchmarks import. Connections are staggered (connectRatePerS) so 10,000 devices
 * ramp up without a thundering herd of half-open sockets.
 */
export class Fleet {
  readonly devices: SimulatedDevice[];
  private connectFailures = 0;
  private stopped = false;
  /** While set, devices that accepted an OTA command wait for it before downloading. */
  private hold: { promise: Promise<void>; release: () => void } | null = null;
  /** Held downloads start spread over this many ms after the release. */
  private releaseSpreadMs = 0;

  constructor(private readonly options: FleetOptions) {
    const random = options.random ?? Math.random;
    const downloadGate = async () => {
      if (!this.hold) return;
      await this.hold.promise;
      if (this.releaseSpreadMs > 0)
        await new Promise((resolve) => setTimeout(resolve, random() * this.releaseSpreadMs));
    };
    const failing = failingDriverSerials(
      options.devices.map((d) => d.serial),
      options.failingDrivers ?? 0,
    );
    this.devices = options.devices.map(
      (credentials) =>
        new SimulatedDevice({
          ...options,
          credentials,
          downloadGate,
          luminaireFaults: { ...options.luminaireFaults, failingDriver: failing.has(credentials.serial) },
        }),
    );
  }

  /** From now on, devices accept OTA commands but start no download until releaseDownloads(). */
  holdDownloads(): void {
    if (this.hold) return;
    let release = () => {};
    const promise = new Promise<void>((resolve) => {
      release = resolve;
    });
    this.hold = { promise, release };
  }

  /**
   * Held downloads start, spread evenly over `spreadMs` (10,000 at the same instant need 10,000
   * more file descriptors on each side at once), and new commands are acted on at once.
   */
  releaseDownloads(spreadMs = 0): void {
    this.releaseSpreadMs = spreadMs;
    this.hold?.release();
    this.hold = null;
  }

  /** Every device heartbeats every `seconds` from now on (each with a fresh random phase). */
  setHeartbeatPeriod(seconds: number): void {
    for (const d of this.devices) d.setHeartbeatPeriod(seconds);
  }

  /** Connects every device (staggered); resolves when each one connected or failed once. */
  async start(
    onProgress?: (stats: FleetStats) => void,
  ): Promise<{ connected: number; failed: number; seconds: number }> {
    const started = performance.now();
    const rate = this.options.connectRatePerS ?? 1000;
    const maxPending = this.options.maxPendingConnects ?? 500;
    let pending = 0;
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; i < this.devices.length && !this.stopped; i++) {
      // Pace: device i starts no earlier than i / rate seconds after the start.
      const due = started + (i / rate) * 1000;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
      while (pending >= maxPending) await Promise.race(inFlight);
      pending += 1;
      const device = this.devices[i]!;
      const attempt = device
        .start()
        .catch((err: unknown) => {
          this.connectFailures += 1;
          device.retryLater(err);
        })
        .finally(() => {
          pending -= 1;
          inFlight.delete(attempt);
        });
      inFlight.add(attempt);
      if (onProgress && i % 500 === 0) onProgress(this.stats());
    }
    await Promise.all(inFlight);
    return {
      connected: this.stats().connected,
      failed: this.connectFailures,
      seconds: (performance.now() - started) / 1000,
    };
  }

  stats(): FleetStats {
    const s: FleetStats = {
      total: this.devices.length,
      connected: 0,
      online: 0,
      updating: 0,
      succeeded: 0,
      failed: 0,
      rolledBack: 0,
      heartbeats: 0,
      heartbeatsAcked: 0,
      connectFailures: this.connectFailures,
      commandsReceived: 0,
      lastCommandAtMs: { first: 0, last: 0 },
    };
    for (const d of this.devices) {
      if (d.connected) s.connected += 1;
      if (d.connected && d.heartbeats > 0) s.online += 1;
      if (d.updating) s.updating += 1;
      s.succeeded += d.outcomes.succeeded;
      s.failed += d.outcomes.failed;
      s.rolledBack += d.outcomes.rolled_back;
      s.heartbeats += d.heartbeats;
      s.heartbeatsAcked += d.heartbeatsAcked;
      s.commandsReceived += d.commandsReceived;
      if (d.lastCommandAtMs > 0) {
        if (s.lastCommandAtMs.first === 0 || d.lastCommandAtMs < s.lastCommandAtMs.first)
          s.lastCommandAtMs.first = d.lastCommandAtMs;
        s.lastCommandAtMs.last = Math.max(s.lastCommandAtMs.last, d.lastCommandAtMs);
      }
    }
    return s;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    // In slices: 10,000 simultaneous DISCONNECTs would just queue up anyway.
    for (let i = 0; i < this.devices.length; i += 1000)
      await Promise.all(this.devices.slice(i, i + 1000).map((d) => d.stop()));
  }
}

/** Serials `PREFIX-000001` ... */
export function makeSerials(prefix: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}-${String(i + 1).padStart(6, '0')}`);
}

/**
 * Claims the serials through the REST batch claim (`POST /api/v1/devices/claim`, at most 1000
 * per request, all or nothing per request) and returns their MQTT credentials.
 */
export async function claimDevices(input: {
  apiUrl: string;
  apiKey: string;
  model: string;
  firmware: string;
  serials: string[];
  /** Also get each device a client certificate: a key and CSR made here, signed in the claim (`csrs`). */
  certificates?: boolean;
  /** CA (PEM) of the service's HTTPS certificate, when it is not one the system trusts. */
  ca?: string;
  onBatch?: (done: number) => void;
  onNote?: (message: string) => void;
}): Promise<DeviceCredentials[]> {
  const out: DeviceCredentials[] = [];
  const base = input.apiUrl.replace(/\/+$/, '');
  // Node's own fetch takes no CA: undici's, with an agent that trusts it.
  const agent = input.ca ? new Agent({ connect: { ca: input.ca } }) : undefined;
  let withFirmware = true;
  for (let i = 0; i < input.serials.length; i += 1000) {
    const serials = input.serials.slice(i, i + 1000);
    const keys = new Map<string, DeviceKeyAndCsr>();
    if (input.certificates) for (const serial of serials) keys.set(serial, await makeKeyAndCsr(serial));
    const csrs = input.certificates
      ? { csrs: Object.fromEntries([...keys].map(([serial, k]) => [serial, k.csr])) }
      : {};
    const post = (firmware: boolean) =>
      undiciFetch(`${base}/api/v1/devices/claim`, {
        method: 'POST',
        headers: { authorization: `Bearer ${input.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          serials,
          model: input.model,
          ...(firmware ? { firmware: input.firmware } : {}),
          ...csrs,
        }),
        ...(agent ? { dispatcher: agent } : {}),
      });
    type ClaimBody = {
      devices?: Array<{
        serial: string;
        credentials: { username: string; password: string };
        certificate?: { certificate: string };
      }>;
      detail?: string;
      code?: string;
      errors?: Array<{ field: string; message: string }>;
    };
    let res = await post(withFirmware);
    let body = (await res.json().catch(() => ({}))) as ClaimBody;
    if (res.status === 422 && body.code === 'version_not_found' && withFirmware) {
      // The devices already run --firmware; without that binary uploaded there is nothing to schedule.
      input.onNote?.(
        `firmware ${input.firmware} is not uploaded for model ${input.model}: claiming without scheduling an update`,
      );
      withFirmware = false;
      res = await post(false);
      body = (await res.json().catch(() => ({}))) as ClaimBody;
    }
    if (res.status !== 201 || !body.devices) {
      const details = (body.errors ?? [])
        .slice(0, 5)
        .map((e) => `${e.field}: ${e.message}`)
        .join('; ');
      throw new Error(
        `claim of serials ${serials[0]}..${serials.at(-1)} failed: HTTP ${res.status} ${body.code ?? ''} ${body.detail ?? ''}${details ? ` (${details})` : ''}`.trim(),
      );
    }
    for (const d of body.devices) {
      const key = keys.get(d.serial);
      out.push({
        serial: d.serial,
        username: d.credentials.username,
        password: d.credentials.password,
        ...(key && d.certificate ? { certificate: d.certificate.certificate, privateKey: key.privateKey } : {}),
      });
    }
    input.onBatch?.(out.length);
  }
  return out;
}

/** GET on the service's REST API with an API key; the JSON body, or an error naming the status. */
async function apiGet<T>(input: { apiUrl: string; apiKey: string; ca?: string }, pathAndQuery: string): Promise<T> {
  const url = `${input.apiUrl.replace(/\/+$/, '')}/api/v1${pathAndQuery}`;
  const agent = input.ca ? new Agent({ connect: { ca: input.ca } }) : undefined;
  let res;
  try {
    res = await undiciFetch(url, {
      headers: { authorization: `Bearer ${input.apiKey}` },
      ...(agent ? { dispatcher: agent } : {}),
    });
  } catch (err) {
    const cause = (err as Error & { cause?: Error }).cause;
    throw new Error(`cannot reach ${url}: ${cause?.message ?? (err as Error).message}`, { cause: err });
  } finally {
    void agent?.close();
  }
  const body = (await res.json().catch(() => ({}))) as T & { code?: string; detail?: string };
  if (!res.ok) throw new Error(`GET ${url} answered ${res.status} ${body.code ?? ''} ${body.detail ?? ''}`.trim());
  return body;
}

/** The broker URLs devices use, as the service gives them (`GET /api/v1/device-endpoints`). */
export interface DeviceEndpoints {
  mqtt_url: string | null;
  mqtts_url: string | null;
  websocket_url: string;
}

export function fetchDeviceEndpoints(input: { apiUrl: string; apiKey: string; ca?: string }): Promise<DeviceEndpoints> {
  return apiGet<DeviceEndpoints>(input, '/device-endpoints');
}

/**
 * Which of the service's endpoints the simulator connects to: plain MQTT when the API is plain
 * HTTP, MQTT over TLS when it is HTTPS (the same CA then trusts both), else MQTT over WebSocket.
 */
export function pickBrokerUrl(endpoints: DeviceEndpoints, apiUrl: string): string {
  const tls = apiUrl.startsWith('https:');
  const url = (tls ? endpoints.mqtts_url : endpoints.mqtt_url) ?? endpoints.mqtt_url ?? endpoints.mqtts_url;
  return url ?? endpoints.websocket_url;
}

/** Devices whose serial contains `q` that the service sees online (`GET /api/v1/devices?status=online`). */
export async function countOnline(input: { apiUrl: string; apiKey: string; ca?: string; q: string }): Promise<number> {
  const query = new URLSearchParams({ status: 'online', limit: '1', ...(input.q ? { q: input.q } : {}) });
  return (await apiGet<{ total: number }>(input, `/devices?${query}`)).total;
}

/** The longest start all serials share (what `q` narrows the online count to). */
export function commonPrefix(serials: string[]): string {
  if (serials.length === 0) return '';
  let prefix = serials[0]!;
  for (const s of serials) while (!s.startsWith(prefix)) prefix = prefix.slice(0, -1);
  return prefix;
}

/** Credentials file: a JSON array of {serial, username, password}. Written with mode 0600: it holds secrets. */
export async function saveCredentials(file: string, devices: DeviceCredentials[]): Promise<void> {
  // Keys and certificates go to --cert-dir, one pair of files per device, never in here.
  const passwords = devices.map(({ serial, username, password }) => ({ serial, username, password }));
  // The README saves them under .local/, which a fresh clone lacks: the devices are claimed by
  // now, and these passwords are shown nowhere else.
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await writeFile(file, JSON.stringify(passwords, null, 1), { mode: 0o600 });
}

export async function loadCredentials(file: string): Promise<DeviceCredentials[]> {
  const parsed = JSON.parse(await readFile(file, 'utf8')) as unknown;
  if (!Array.isArray(parsed)) throw new Error(`${file}: expected a JSON array of {serial, username, password}`);
  return parsed.map((d, i) => {
    const item = d as Partial<DeviceCredentials>;
    if (typeof item.serial !== 'string' || typeof item.username !== 'string' || typeof item.password !== 'string')
      throw new Error(`${file}: entry ${i} needs serial, username and password`);
    return { serial: item.serial, username: item.username, password: item.password };
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
