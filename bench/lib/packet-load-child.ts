import { PacketLoad, type LoadDevice } from './packet-load';

/**
 * One generator process of bench/lib/packet-load-pool.ts, driven over IPC: `connect` its share
 * of the devices, `run` a paced phase, `close`. Heartbeat payloads are built here, once per
 * device and phase, as the protocol's heartbeat (docs/device-protocol.md).
 */
const load = new PacketLoad();
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
      })
      .then(reply, fail);
  } else if (message.cmd === 'run') {
    const started = Date.now();
    load
      .run({
        rate: message.rate as number,
        seconds: message.seconds as number,
        topic: (serial) => `devices/${serial}/heartbeat`,
        payload: (serial, sequence) =>
          Buffer.from(
            JSON.stringify({
              firmware: '1.0.0',
              uptime_s: Math.floor((Date.now() - started) / 1000) + sequence,
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
