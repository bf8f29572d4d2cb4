import net from 'node:net';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import mqttPacket from 'mqtt-packet';

/**
 * A lean MQTT 3.1.1 load generator: raw sockets and mqtt-packet's encoder and parser, nothing
 * else (no client state machine, no store, no timers per client). It exists because mqtt.js
 * costs about as much CPU per message as the broker under test, so on 2 cores the generator
 * saturated first and a benchmark measured the generator. Each publish is QoS 1; its PUBACK
 * gives the acknowledgement latency. Runs in a process of its own (packet-load-child.ts).
 */
export interface LoadDevice {
  serial: string;
  username?: string;
  password?: string;
}

export interface ConnectResult {
  connected: number;
  failed: number;
  seconds: number;
  /** This process's CPU for the connects (µs). */
  cpuUs: number;
}

export interface PhaseResult {
  offered: number;
  sent: number;
  acked: number;
  /** PUBACK latency, in ms, over every publish sent: one never acknowledged counts as infinite. */
  p50Ms: number;
  p99Ms: number;
  /** Up to 5,000 latencies (ms), evenly sampled, for merging the percentiles of several generators. */
  sample: number[];
  /** This process's CPU for the phase (µs) and its event-loop delay p99 (ms): the generator's own limits. */
  cpuUs: number;
  lagP99Ms: number;
  /** Publishes the pacer could not send on time (its timer fell behind): a generator limit. */
  late: number;
  seconds: number;
}

interface Connection {
  socket: net.Socket;
  serial: string;
  nextId: number;
  sentAt: Map<number, number>;
}

/**
 * A source address for the n-th connection, 2,000 per address. An address has about 28,000
 * ephemeral ports, and the kernel's search for a free one (bind to port 0) slows as they fill:
 * at 20,000 per address a connection cost the generator 2.9 ms of CPU, mostly in the kernel,
 * where the first 2,000 cost 0.3 ms, and a ramp measured the generator.
 */
const sourceAddress = (n: number) => `127.0.${Math.floor(n / 500_000)}.${1 + (Math.floor(n / 2_000) % 250)}`;

export class PacketLoad {
  private connections: Connection[] = [];
  private latencies: number[] = [];
  private acked = 0;

  /**
   * Connects every device (at most `parallel` CONNECTs in flight); resolves when each has its
   * CONNACK. With `subscribe` (topic filters, `{serial}` standing for the device's serial), a
   * device whose CONNACK brought no session subscribes to them at QoS 1 as a device does, and
   * counts as connected on its SUBACK (every filter granted).
   */
  async connect(input: {
    host: string;
    port: number;
    devices: LoadDevice[];
    clean: boolean;
    parallel?: number;
    offset?: number;
    subscribe?: string[];
  }): Promise<ConnectResult> {
    const started = performance.now();
    const cpu = process.cpuUsage();
    let failed = 0;
    let next = 0;
    const worker = async () => {
      while (next < input.devices.length) {
        const index = next++;
        const connection = await this.open(input, input.devices[index]!, (input.offset ?? 0) + index).catch(() => null);
        if (connection) this.connections.push(connection);
        else failed += 1;
      }
    };
    await Promise.all(Array.from({ length: input.parallel ?? 200 }, worker));
    const used = process.cpuUsage(cpu);
    return {
      connected: this.connections.length,
      failed,
      seconds: (performance.now() - started) / 1000,
      cpuUs: used.user + used.system,
    };
  }

  private open(
    input: { host: string; port: number; clean: boolean; subscribe?: string[] },
    device: LoadDevice,
    n: number,
  ): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: input.host, port: input.port, localAddress: sourceAddress(n) });
      socket.setNoDelay(true);
      const connection: Connection = { socket, serial: device.serial, nextId: 1, sentAt: new Map() };
      const parser = mqttPacket.parser({ protocolVersion: 4 });
      let open = false;
      const opened = () => {
        open = true;
        resolve(connection);
      };
      const refused = (why: string) => {
        socket.destroy();
        reject(new Error(why));
      };
      const filters = (input.subscribe ?? []).map((f) => f.replaceAll('{serial}', device.serial));
      parser.on('packet', (packet) => {
        if (packet.cmd === 'connack') {
          if (packet.returnCode !== 0) refused(`CONNACK ${packet.returnCode}`);
          else if (filters.length === 0 || packet.sessionPresent) opened();
          else
            socket.write(
              mqttPacket.generate({
                cmd: 'subscribe',
                messageId: 1,
                subscriptions: filters.map((topic) => ({ topic, qos: 1 as const })),
              }),
            );
        } else if (packet.cmd === 'suback' && !open) {
          if (packet.granted.every((g) => typeof g === 'number' && g <= 2)) opened();
          else refused(`SUBACK ${JSON.stringify(packet.granted)}`);
        } else if (packet.cmd === 'puback') {
          const at = connection.sentAt.get(packet.messageId!);
          if (at !== undefined) {
            connection.sentAt.delete(packet.messageId!);
            this.acked += 1;
            this.latencies.push(performance.now() - at);
          }
        } else if (packet.cmd === 'publish' && packet.qos === 1) {
          // A command or configuration for the device: acknowledged, as a device does.
          socket.write(mqttPacket.generate({ cmd: 'puback', messageId: packet.messageId! }));
        }
      });
      socket.on('data', (data) => parser.parse(data));
      socket.on('error', (error) => (open ? undefined : reject(error)));
      socket.on('close', () => (open ? undefined : reject(new Error('closed before it was connected'))));
      socket.write(
        mqttPacket.generate({
          cmd: 'connect',
          protocolId: 'MQTT',
          protocolVersion: 4,
          clientId: device.serial,
          clean: input.clean,
          keepalive: 0,
          ...(device.username ? { username: device.username } : {}),
          ...(device.password ? { password: Buffer.from(device.password) } : {}),
        }),
      );
    });
  }

  /**
   * Publishes QoS 1 messages round-robin over the connections at `rate` per second for
   * `seconds`, paced in 10 ms ticks, then waits up to 2 s for the last acknowledgements.
   */
  async run(input: {
    rate: number;
    seconds: number;
    topic: (serial: string) => string;
    payload: (serial: string, sequence: number) => Buffer;
  }): Promise<PhaseResult> {
    this.latencies = [];
    this.acked = 0;
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const cpu = process.cpuUsage();
    const started = performance.now();
    const total = Math.round(input.rate * input.seconds);
    let sent = 0;
    let late = 0;
    let cursor = 0;
    const topics = new Map(this.connections.map((c) => [c.serial, input.topic(c.serial)]));
    await new Promise<void>((resolve) => {
      const tick = () => {
        const elapsed = (performance.now() - started) / 1000;
        const due = Math.min(total, Math.floor(elapsed * input.rate));
        // More than 50 ms of publishes at once: the pacer fell behind (counted, still sent).
        if (due - sent > input.rate * 0.05) late += due - sent;
        while (sent < due && this.connections.length) {
          const c = this.connections[cursor++ % this.connections.length]!;
          const messageId = c.nextId;
          c.nextId = c.nextId === 65535 ? 1 : c.nextId + 1;
          c.sentAt.set(messageId, performance.now());
          c.socket.write(
            mqttPacket.generate({
              cmd: 'publish',
              topic: topics.get(c.serial)!,
              payload: input.payload(c.serial, sent),
              qos: 1,
              messageId,
              retain: false,
              dup: false,
            }),
          );
          sent += 1;
        }
        if (sent >= total) resolve();
        else setTimeout(tick, 10);
      };
      tick();
    });
    const sendEnded = performance.now();
    while (this.acked < sent && performance.now() - sendEnded < 2000) await new Promise((r) => setTimeout(r, 20));
    const used = process.cpuUsage(cpu);
    lag.disable();
    const sorted = this.latencies.sort((a, b) => a - b);
    const at = (q: number) => (Math.floor(q * sent) < sorted.length ? sorted[Math.floor(q * sent)]! : Infinity);
    const step = Math.max(1, Math.ceil(sorted.length / 5000));
    for (const c of this.connections) c.sentAt.clear();
    return {
      offered: input.rate,
      sent,
      acked: this.acked,
      p50Ms: at(0.5),
      p99Ms: at(0.99),
      sample: sorted.filter((_, i) => i % step === 0),
      cpuUs: used.user + used.system,
      lagP99Ms: lag.percentile(99) / 1e6,
      late,
      seconds: (sendEnded - started) / 1000,
    };
  }

  /** Sends DISCONNECT and closes every socket. */
  close(): void {
    for (const c of this.connections) {
      c.socket.end(mqttPacket.generate({ cmd: 'disconnect' }));
    }
    this.connections = [];
  }
}
