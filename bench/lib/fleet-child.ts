import { Fleet } from '#simulator/fleet';
import type { FleetCommand, ProbeHeartbeat } from './fleet-process';

/** The process behind bench/lib/fleet-process.ts: one Fleet, driven over IPC. */
let fleet: Fleet | undefined;
let probeTimer: NodeJS.Timeout | undefined;
const probeLog: ProbeHeartbeat[] = [];

/** Epoch milliseconds with sub-millisecond resolution, comparable across processes of one machine. */
const epochMs = (performanceNow: number) => performance.timeOrigin + performanceNow;

/** Records every heartbeat of the first `count` connected devices; returns their serials. */
function watchProbes(count: number): string[] {
  const probes = fleet!.devices.filter((d) => d.connected).slice(0, count);
  const last = new Map<string, number>();
  clearInterval(probeTimer);
  probeTimer = setInterval(() => {
    for (const d of probes) {
      const hb = d.lastHeartbeat;
      if (!hb || last.get(d.serial) === hb.uptimeS) continue;
      last.set(d.serial, hb.uptimeS);
      probeLog.push({ serial: d.serial, uptimeS: hb.uptimeS, sentAtMs: epochMs(hb.at) });
    }
  }, 5);
  return probes.map((d) => d.serial);
}

async function run(msg: FleetCommand): Promise<unknown> {
  switch (msg.cmd) {
    case 'start':
      fleet = new Fleet(msg.options);
      return fleet.start();
    case 'heartbeatPeriod':
      fleet?.setHeartbeatPeriod(msg.seconds);
      return {};
    case 'holdDownloads':
      fleet?.holdDownloads();
      return {};
    case 'releaseDownloads':
      fleet?.releaseDownloads(msg.spreadMs);
      return {};
    case 'stats':
      return { ...fleet?.stats(), cpu: process.cpuUsage(), atMs: epochMs(performance.now()) };
    case 'watchProbes':
      return { serials: watchProbes(msg.count) };
    case 'probeLog':
      clearInterval(probeTimer);
      return probeLog.splice(0);
    case 'stop':
      clearInterval(probeTimer);
      await fleet?.stop();
      return {};
  }
}

process.on('message', (raw) => {
  run(raw as FleetCommand).then(
    // After a stop the process exits once the answer is out (so a --cpu-prof profile gets written).
    (result) =>
      process.send?.(
        { ok: true, result },
        undefined,
        {},
        () => (raw as FleetCommand).cmd === 'stop' && process.exit(0),
      ),
    (error: unknown) => process.send?.({ ok: false, error: error instanceof Error ? error.message : String(error) }),
  );
});
