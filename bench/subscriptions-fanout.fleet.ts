import { SimulatedDevice, type DeviceCredentials } from '#simulator/simulated-device';

/**
 * The device side of bench/subscriptions-fanout.bench.ts, in its own process (10,000 MQTT
 * clients must not share an event loop with the subscribers being timed). It connects every
 * device (staggered), then drops `flapsPerSecond` random connected devices per second without
 * DISCONNECT (the broker publishes the Last Will); each reconnects 1 to 5 s later. Every
 * connect and drop is reported over IPC with its wall-clock time: the "MQTT event" moments.
 */
interface Start {
  cmd: 'start';
  brokerUrl: string;
  devices: DeviceCredentials[];
  connectRatePerS: number;
}
interface Flap {
  cmd: 'flap';
  flapsPerSecond: number;
  seconds: number;
}
interface Stop {
  cmd: 'stop';
}

let devices: SimulatedDevice[] = [];
let outbox: Array<[string, 0 | 1, number]> = [];
const flush = setInterval(() => {
  if (outbox.length === 0) return;
  process.send?.({ transitions: outbox });
  outbox = [];
}, 20);

async function handle(msg: Start | Flap | Stop): Promise<void> {
  if (msg.cmd === 'start') {
    devices = msg.devices.map(
      (credentials) =>
        new SimulatedDevice({
          credentials,
          brokerUrl: msg.brokerUrl,
          firmware: '1.0.0',
          heartbeatS: 60,
          heartbeatQos: 0,
          onChange: (device) => outbox.push([device.serial, device.connected ? 1 : 0, Date.now()]),
        }),
    );
    const started = performance.now();
    let failed = 0;
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; i < devices.length; i++) {
      const wait = started + (i / msg.connectRatePerS) * 1000 - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      while (inFlight.size >= 500) await Promise.race(inFlight);
      const attempt = devices[i]!.start()
        .catch(() => void (failed += 1))
        .finally(() => inFlight.delete(attempt));
      inFlight.add(attempt);
    }
    await Promise.all(inFlight);
    process.send?.({ started: true, connected: devices.filter((d) => d.connected).length, failed });
  } else if (msg.cmd === 'flap') {
    const perTick = msg.flapsPerSecond / 10;
    let carry = 0;
    let flaps = 0;
    const timer = setInterval(() => {
      carry += perTick;
      while (carry >= 1) {
        carry -= 1;
        const device = devices[Math.floor(Math.random() * devices.length)];
        if (device?.connected) {
          device.dropConnection();
          flaps += 1;
        }
      }
    }, 100);
    setTimeout(() => {
      clearInterval(timer);
      process.send?.({ flapped: flaps });
    }, msg.seconds * 1000);
  } else {
    clearInterval(flush);
    await Promise.all(devices.map((d) => d.stop().catch(() => undefined)));
    process.send?.({ stopped: true });
    process.exit(0);
  }
}

process.on('message', (raw) => void handle(raw as Start | Flap | Stop));
