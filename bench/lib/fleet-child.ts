import { Fleet, type FleetOptions } from '../../simulator/src/fleet';

/** The process behind bench/lib/fleet-process.ts: one Fleet, driven over IPC. */
let fleet: Fleet | undefined;

process.on('message', (raw) => {
  const msg = raw as { cmd: 'start'; options: FleetOptions } | { cmd: 'stop' };
  const run = async (): Promise<unknown> => {
    if (msg.cmd === 'start') {
      fleet = new Fleet(msg.options);
      return fleet.start();
    }
    await fleet?.stop();
    return {};
  };
  run().then(
    (result) => process.send?.({ ok: true, result }),
    (error: Error) => process.send?.({ ok: false, error: error.message }),
  );
});
