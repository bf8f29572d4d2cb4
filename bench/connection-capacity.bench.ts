import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { claimBenchFleet } from './lib/claimed-fleet';
import { addUpdateHistory } from './lib/update-history';
import { startBenchServer } from './lib/bench-server';
import { heapGrowth, summariseHeap } from './lib/heap-summary';
import { startBareAedes } from './lib/bare-aedes';
import { PacketLoadPool } from './lib/packet-load-pool';
import type { LoadDevice } from './lib/packet-load';
import { isSmoke, recordResults } from './lib/results';
import { baselineCpuMeter, serviceCpuMeter, withDatabaseShare, type BrokerCpuMeter } from './lib/service-cpu';
import { makeSerials } from '#simulator/fleet';
import { topics } from '#protocol/topics';

/**
 * What connections cost the service against bare Aedes 1.2 in the same run, with the lean
 * packet generator (bench/lib/packet-load.ts), clean=false and a password as devices connect,
 * each then subscribing to its own topics as a device on a new session does:
 *  1. a burst: BURST clients at once (every CONNECT in flight together), as after a site's power
 *     cut. Broker CPU per connection (ours: plus its PostgreSQL backends) and the connect rate.
 *     Targets: CPU at most 1.15x bare Aedes; rate at least 0.9x.
 *  2. the rest up to DEVICES as fast as 200 CONNECTs in flight per generator allow: the same
 *     figures (the paced ramp at 500/s is bench/connections.bench.ts).
 *  3. memory per connected idle device at DEVICES: RSS and V8 heap after a forced GC, before the
 *     first connection and after the last. Target: at most bare Aedes plus 2 KB.
 * A phase whose generators used more than 80 % of a core is marked generator-bound: its rate
 * then says what the generators could offer, not what the broker could take.
 *
 *   node --import tsx bench/connection-capacity.bench.ts              (embedded database)
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/connection-capacity.bench.ts
 *   options: --devices N (default 20000; refused when more than the open-files limit allows) --burst B (default 2000) --generators G (default 2) --dry
 *   --connect-only (devices send CONNECT alone; by default a device on a new session then
 *   subscribes to its ota, config and credentials topics, as the simulator and a real device do,
 *   and counts as connected on its SUBACK: for both brokers)
 *   --history U (default 5: the fleet has U succeeded updates behind it, the newest two days old,
 *   written as rows after the claim, as in service; 0: a freshly claimed fleet)
 *   --heap DIR (heap snapshots of ours before and after the connections, and the kinds of object
 *   that grew most per device; records nothing: a snapshot inflates the RSS that follows it)
 *   --profile DIR (CPU profiles of ours and of bare Aedes during the ramp, written to DIR: summarise them with
 *   bench/lib/profile-summary.ts; records nothing: sampling slows the service)
 */
const smoke = isSmoke();
const heapDir = process.argv.includes('--heap') ? process.argv[process.argv.indexOf('--heap') + 1] : undefined;
const profileDir = process.argv.includes('--profile') ? process.argv[process.argv.indexOf('--profile') + 1] : undefined;
// A profiled run is slower (sampling every 100 µs): its figures are not the service's.
const dry = process.argv.includes('--dry') || heapDir !== undefined || profileDir !== undefined;
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const DEVICES = smoke ? 60 : arg('devices', 20_000);
const BURST = smoke ? 20 : Math.min(arg('burst', 2000), DEVICES);
const GENERATORS = smoke ? 1 : arg('generators', 2);
const HISTORY = arg('history', 5);
/**
 * What a device subscribes to on a new session (simulator/src/simulated-device.ts): the service
 * then sends its configuration, dispatches its queued update and runs the rollout health gate.
 */
const SUBSCRIBE = process.argv.includes('--connect-only')
  ? undefined
  : [topics.ota('{serial}'), topics.config('{serial}'), topics.credentials('{serial}')];
/** Connected first, unmeasured: the first connections pay for JIT compilation. */
const WARM_UP = smoke ? 10 : Math.min(500, Math.floor(DEVICES / 10));
const TARGET_CPU = 1.15;
const TARGET_RATE = 0.9;
const TARGET_MEMORY_EXTRA_KB = 2;

interface Phase {
  connected: number;
  failed: number;
  perSecond: number;
  brokerUsEach: number;
  generatorUsEach: number;
  generatorBound: boolean;
  /** PostgreSQL transactions committed per connection (a statement outside a transaction is one); ours on PostgreSQL only. */
  transactionsEach?: number;
  /** The database's part of brokerUsEach (PostgreSQL backends, or the embedded database's thread); ours only. */
  databaseUsEach?: number;
  /** The broker process's kernel time, part of brokerUsEach (sockets, epoll; loopback delivery of what it sends). */
  kernelUsEach: number;
}

interface Capacity {
  name: string;
  /** Ours: the database its share of the CPU was measured in. */
  database?: 'postgres' | 'embedded';
  burst: Phase;
  ramp: Phase;
  rssKbEach: number;
  heapKbEach: number;
}

interface Target {
  name: string;
  database?: 'postgres' | 'embedded';
  url: string;
  devices: LoadDevice[];
  /** Broker CPU (µs) between start and stop, PostgreSQL backends included for ours, with the database's part. */
  cpu: BrokerCpuMeter;
  /** Transactions the database committed during the last CPU measurement (PostgreSQL only). */
  transactions?: () => number | undefined;
  memory(): Promise<NodeJS.MemoryUsage>;
  heapSnapshot?: (file: string) => Promise<void>;
  /** Profiles the ramp (with --profile). */
  profile?: { start(): Promise<void>; stop(): Promise<void> };
  stop(): Promise<void>;
}

async function measure(target: Target, offset: number): Promise<Capacity> {
  const pool = await PacketLoadPool.start(GENERATORS);
  try {
    const before = await target.memory();
    const snapshot = heapDir && target.heapSnapshot ? target.heapSnapshot : undefined;
    await snapshot?.(path.join(heapDir ?? '', 'before.heapsnapshot'));
    const phase = async (devices: LoadDevice[], parallel: number, from: number, profiled = false): Promise<Phase> => {
      if (profiled) await target.profile?.start();
      await target.cpu.start();
      const result = await pool.connect({
        url: target.url,
        devices,
        clean: false,
        parallel,
        offset: from,
        ...(SUBSCRIBE ? { subscribe: SUBSCRIBE } : {}),
      });
      const { totalUs: used, databaseUs, kernelUs } = await target.cpu.stop();
      if (profiled) await target.profile?.stop();
      // The generators report every connection they hold, earlier phases' included.
      const connected = devices.length - result.failed;
      // The generators' busiest share of a core over the phase (each gets an equal share of the devices).
      const generatorLoad = result.cpuUs / GENERATORS / 1e6 / Math.max(result.seconds, 1e-3);
      return {
        connected,
        failed: result.failed,
        perSecond: connected / Math.max(result.seconds, 1e-3),
        brokerUsEach: used / Math.max(1, connected),
        generatorUsEach: result.cpuUs / Math.max(1, connected),
        generatorBound: generatorLoad > 0.8,
        ...(target.transactions?.() !== undefined
          ? { transactionsEach: target.transactions()! / Math.max(1, connected) }
          : {}),
        ...(databaseUs !== undefined ? { databaseUsEach: databaseUs / Math.max(1, connected) } : {}),
        kernelUsEach: kernelUs / Math.max(1, connected),
      };
    };
    await phase(target.devices.slice(0, WARM_UP), 50, offset);
    const burst = await phase(
      target.devices.slice(WARM_UP, WARM_UP + BURST),
      Math.ceil(BURST / GENERATORS),
      offset + WARM_UP,
    );
    const ramp = await phase(target.devices.slice(WARM_UP + BURST), 200, offset + WARM_UP + BURST, true);
    // Presence writes of the last connections land with the next flush.
    await new Promise((r) => setTimeout(r, 3000));
    const after = await target.memory();
    const connected = WARM_UP + burst.connected + ramp.connected;
    if (snapshot) {
      await snapshot(path.join(heapDir ?? '', 'after.heapsnapshot'));
      const grew = heapGrowth(
        summariseHeap(path.join(heapDir ?? '', 'before.heapsnapshot')),
        summariseHeap(path.join(heapDir ?? '', 'after.heapsnapshot')),
        connected,
      );
      console.log(`${target.name}: bytes and objects per device, by kind`);
      for (const row of grew)
        console.log(`${row.bytesEach.toFixed(0).padStart(8)} ${row.countEach.toFixed(2).padStart(7)}  ${row.kind}`);
    }
    const each = (a: number, b: number) => (a - b) / 1024 / Math.max(1, connected);
    const result = {
      name: target.name,
      database: target.database,
      burst,
      ramp,
      rssKbEach: each(after.rss, before.rss),
      heapKbEach: each(after.heapUsed, before.heapUsed),
    };
    console.log(JSON.stringify(result));
    return result;
  } finally {
    await pool.stop();
    await target.stop();
  }
}

async function bareAedesTarget(): Promise<Target> {
  const bare = await startBareAedes();
  return {
    name: 'bare Aedes',
    url: bare.url,
    devices: makeSerials('CCB', DEVICES).map((serial) => ({ serial, username: serial, password: 'x' })),
    cpu: baselineCpuMeter(() => bare.cpuUsage()),
    memory: async () => (await bare.gc()).memory,
    ...(profileDir ? { profile: rampProfile(profileDir, 'bare-aedes', bare) } : {}),
    stop: () => bare.stop(),
  };
}

/** Writes a CPU profile of a broker's ramp to DIR/connection-ramp-<who>-<time>.cpuprofile. */
function rampProfile(
  dir: string,
  who: string,
  broker: { startProfile(): Promise<unknown>; stopProfile(file: string): Promise<unknown> },
): { start(): Promise<void>; stop(): Promise<void> } {
  return {
    start: async () => {
      await broker.startProfile();
    },
    stop: async () => {
      mkdirSync(dir, { recursive: true });
      const file = path.resolve(dir, `connection-ramp-${who}-${Date.now()}.cpuprofile`);
      await broker.stopProfile(file);
      console.log(`profile of the ${who} ramp: ${file}`);
    },
  };
}

async function serviceTarget(): Promise<Target> {
  const server = await startBenchServer();
  const { account, credentials } = await claimBenchFleet(server, { prefix: 'CCS', count: DEVICES });
  await addUpdateHistory(server, { accountId: account.accountId, updates: HISTORY });
  if (server.database === 'postgres') {
    // The claim just wrote every device: without this, autovacuum's pass over the new rows (its
    // workers count as the database's backends) and the first writes after a checkpoint (whole
    // pages to the WAL) fell inside one measured phase or another at random, and the same code
    // measured 1.34x to 2.42x bare Aedes in a burst across runs of one hour.
    await server.sql('VACUUM ANALYZE');
    await server.sql('CHECKPOINT');
  }
  const meter = await serviceCpuMeter(server);
  return {
    name: `service (${server.database === 'postgres' ? 'PostgreSQL' : 'embedded database'})`,
    database: server.database,
    url: server.mqttUrl,
    devices: credentials.map((c) => ({ serial: c.serial, username: c.username, password: c.password })),
    cpu: meter,
    memory: () => server.gc(),
    heapSnapshot: (file) => server.heapSnapshot(file),
    transactions: () => meter.transactions(),
    ...(profileDir ? { profile: rampProfile(profileDir, 'service', server) } : {}),
    stop: async () => {
      await meter.close();
      await server.stop();
    },
  };
}

/**
 * The hard limit on open files of a process here (`ulimit -Hn`; Node raises its soft limit to it
 * at start): each broker holds one socket per device plus its own files, and past the limit
 * bare Aedes met EMFILE and the run hung. Refused up front instead, with the size that fits.
 */
function openFilesLimit(): number {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const hard = line?.trim().split(/\s+/)[4];
  return hard === undefined || hard === 'unlimited' ? Infinity : Number(hard);
}
const OWN_FILES = 500;
if (DEVICES + OWN_FILES > openFilesLimit()) {
  console.error(
    `!! ${DEVICES} devices need about ${DEVICES + OWN_FILES} open files in one broker process; this machine allows ${openFilesLimit()} (ulimit -Hn). Run with --devices ${openFilesLimit() - OWN_FILES} or less, or raise the hard limit.`,
  );
  process.exit(2);
}

const bare = await measure(await bareAedesTarget(), 0);
const ours = await measure(await serviceTarget(), 2 * DEVICES);

const us = (n: number) => `${n.toFixed(0)} µs`;
const cpuOf = (p: Phase, c: Capacity) => withDatabaseShare(p.brokerUsEach, p.databaseUsEach, c.database ?? 'embedded');
const kernelOf = (p: Phase) => `kernel ${us(p.kernelUsEach)}; `;
const bound = (p: Phase) => (p.generatorBound ? ' (generator-bound)' : '');
const line = (c: Capacity) =>
  `${c.name}: burst of ${c.burst.connected} (${c.burst.failed} failed) at ${c.burst.perSecond.toFixed(0)}/s${bound(c.burst)}, ${cpuOf(c.burst, c)} broker CPU each (${kernelOf(c.burst)}generator ${us(c.burst.generatorUsEach)}); ramp of ${c.ramp.connected} (${c.ramp.failed} failed) at ${c.ramp.perSecond.toFixed(0)}/s${bound(c.ramp)}, ${cpuOf(c.ramp, c)} each (${kernelOf(c.ramp)}generator ${us(c.ramp.generatorUsEach)}); memory ${c.rssKbEach.toFixed(1)} KB RSS, ${c.heapKbEach.toFixed(1)} KB heap per device`;
const figures = [line(bare), line(ours)];
const burstCpu = ours.burst.brokerUsEach / bare.burst.brokerUsEach;
const rampCpu = ours.ramp.brokerUsEach / bare.ramp.brokerUsEach;
const burstRate = ours.burst.perSecond / bare.burst.perSecond;
const rampRate = ours.ramp.perSecond / bare.ramp.perSecond;
const extraRss = ours.rssKbEach - bare.rssKbEach;
const extraHeap = ours.heapKbEach - bare.heapKbEach;
const signed = (n: number) => `${n >= 0 ? '+' : '-'}${Math.abs(n).toFixed(1)}`;
figures.push(
  `ratios: burst CPU ${burstCpu.toFixed(2)}x, ramp CPU ${rampCpu.toFixed(2)}x, burst rate ${burstRate.toFixed(2)}x, ramp rate ${rampRate.toFixed(2)}x; memory ${signed(extraRss)} KB RSS, ${signed(extraHeap)} KB heap per device`,
);
for (const f of figures) console.log(f);

if (!smoke && !dry) {
  const command = `${process.env.BENCH_DATABASE_URL ? 'BENCH_DATABASE_URL=<postgres> ' : ''}node --import tsx bench/connection-capacity.bench.ts`;
  const anyBound = [bare.burst, bare.ramp, ours.burst, ours.ramp].some((p) => p.generatorBound);
  const historyNote = `; ${SUBSCRIBE ? 'CONNECT and SUBSCRIBE' : 'CONNECT alone'}, ${HISTORY > 0 ? `${HISTORY} past updates per device` : 'no update history'}`;
  const rateMet = (ratio: number, phases: Phase[]) =>
    phases.some((p) => p.generatorBound) ? null : ratio >= TARGET_RATE;
  recordResults({
    title: `Connection capacity: burst of ${BURST}, ${DEVICES} devices, ${ours.name} against bare Aedes`,
    command,
    figures,
    notes: [
      `${GENERATORS} packet-load generator processes on the same cores as the broker${anyBound ? '; a phase marked generator-bound measured the generators' : ''}.`,
      HISTORY > 0
        ? `The service's fleet has ${HISTORY} succeeded updates per device behind it (the newest two days old), as in service.`
        : "The service's fleet was freshly claimed: no update history.",
    ],
    current: [
      {
        id: `Connection burst, ${BURST} at once, CPU vs bare Aedes (${ours.name})`,
        figure: `${cpuOf(ours.burst, ours)} against ${us(bare.burst.brokerUsEach)}: ratio ${burstCpu.toFixed(2)}; rate ${ours.burst.perSecond.toFixed(0)}/s against ${bare.burst.perSecond.toFixed(0)}/s: ${burstRate.toFixed(2)}x${bound(ours.burst) || bound(bare.burst)}${historyNote}`,
        target: `CPU <= ${TARGET_CPU}x, rate >= ${TARGET_RATE}x bare Aedes`,
        met: burstCpu <= TARGET_CPU && rateMet(burstRate, [ours.burst, bare.burst]) !== false,
      },
      {
        id: `Connection ramp to ${DEVICES.toLocaleString('en')}, CPU vs bare Aedes (${ours.name})`,
        figure: `${cpuOf(ours.ramp, ours)} against ${us(bare.ramp.brokerUsEach)}: ratio ${rampCpu.toFixed(2)}; rate ${ours.ramp.perSecond.toFixed(0)}/s against ${bare.ramp.perSecond.toFixed(0)}/s: ${rampRate.toFixed(2)}x${bound(ours.ramp) || bound(bare.ramp)}${historyNote}`,
        target: `CPU <= ${TARGET_CPU}x, rate >= ${TARGET_RATE}x bare Aedes`,
        met: rampCpu <= TARGET_CPU && rateMet(rampRate, [ours.ramp, bare.ramp]) !== false,
      },
      {
        id: `Memory per connected idle device at ${DEVICES.toLocaleString('en')} (${ours.name})`,
        figure: `${ours.rssKbEach.toFixed(1)} KB RSS (${ours.heapKbEach.toFixed(1)} KB heap) against bare Aedes ${bare.rssKbEach.toFixed(1)} KB (${bare.heapKbEach.toFixed(1)} KB): ${signed(extraRss)} KB`,
        target: `<= bare Aedes + ${TARGET_MEMORY_EXTRA_KB} KB`,
        met: extraRss <= TARGET_MEMORY_EXTRA_KB,
      },
    ],
  });
}
