import { PacketLoad, type LoadDevice } from './packet-load';

/**
 * One generator process of bench/lib/packet-load-pool.ts, driven over IPC: `connect` its share
 * of the devices, `run` a paced phase, `close`. Heartbeat payloads are built here, as the
 * protocol's heartbeat (docs/device-protocol.md).
 */
const load = new PacketLoad();
// A device's uptime only grows while it runs: counted from this generator's start, so that no
// phase looks like every device rebooting (the service counts an uptime that went back as an
// unexpected reboot and writes it, which a steady fleet never makes it do).
const bootedAt = Date.now();
const send = (message: unknown) => process.send!(message);

process.on('message', (raw) => {
  const message = raw as { id: number; cmd: string; [key: string]: unknown };
  const reply = (result: unknown) => send({ id: message.id, result });
  const fail = (error: unknown) => send({ id: message.id, error: String(error) });
  if (message.cmd === 'connect') {
    load
      .connect({
        host: message.host as string,
        port: message.port as number,
        devices: message.devices as LoadDevice[],
        clean: message.clean as boolean,
        offset: message.offset as number,
        ...(typeof message.parallel === 'number' ? { parallel: message.parallel } : {}),
        ...(Array.isArray(message.subscribe) ? { subscribe: message.subscribe as string[] } : {}),
      })
      .then(reply, fail);
  } else if (message.cmd === 'run') {
    load
      .run({
        rate: message.rate as number,
        seconds: message.seconds as number,
        topic: (serial) => `devices/${serial}/heartbeat`,
        payload: () =>
          Buffer.from(
            JSON.stringify({
              firmware: '1.0.0',
              uptime_s: Math.floor((Date.now() - bootedAt) / 1000),
              rssi: -60,
              ip: '10.0.0.1',
            }),
          ),
      })
      .then(reply, fail);
  } else if (message.cmd === 'close') {
    load.close();
    reply(true);
    setTimeout(() => process.exit(0), 200);
  }
});
send({ ready: true });
