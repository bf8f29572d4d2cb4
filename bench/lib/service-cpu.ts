import type { BenchServer } from './bench-server';

/** What one phase cost the service (µs): its whole CPU and the database's part of it. */
export interface ServiceCpu {
  /** The service process, plus its PostgreSQL backends on PostgreSQL. */
  totalUs: number;
  /** The PostgreSQL backends, or the embedded database's thread (part of the process); undefined where not measured. */
  databaseUs: number | undefined;
  /**
   * The broker process's system (kernel) time, part of totalUs: its socket reads and writes, epoll,
   * and on loopback the delivery of what it sends. PostgreSQL's backends are not in it.
   */
  kernelUs: number;
}

/**
 * The service's CPU over a phase, with the database's share apart: on PostgreSQL the backends of
 * its database (added to the process's CPU), on the embedded database the database thread
 * (already inside the process's CPU). What a benchmark needs to say where a ratio to bare Aedes
 * comes from: the event loop's own work or the database's.
 */
export async function serviceCpuMeter(server: BenchServer): Promise<
  BrokerCpuMeter & {
    /** Transactions committed during the last phase (PostgreSQL only). */
    transactions(): number | undefined;
    close(): Promise<void>;
  }
> {
  const postgres = await server.postgresCpu();
  let atStart: { processUs: number; systemUs: number; threadUs: number | undefined } = {
    processUs: 0,
    systemUs: 0,
    threadUs: undefined,
  };
  const read = async () => {
    const used = await server.cpu();
    return { processUs: used.user + used.system, systemUs: used.system, threadUs: used.databaseThreadUs };
  };
  return {
    start: async () => {
      atStart = await read();
      await postgres?.start();
    },
    stop: async () => {
      const now = await read();
      const backends = await postgres?.stop();
      const processUs = now.processUs - atStart.processUs;
      const kernelUs = now.systemUs - atStart.systemUs;
      if (backends !== undefined) return { totalUs: processUs + backends, databaseUs: backends, kernelUs };
      const threadUs =
        now.threadUs !== undefined && atStart.threadUs !== undefined ? now.threadUs - atStart.threadUs : undefined;
      // The thread's /proc figure moves in 10 ms ticks, the process's in µs: over a short phase
      // the part could read more than the whole.
      return {
        totalUs: processUs,
        databaseUs: threadUs === undefined ? undefined : Math.min(threadUs, processUs),
        kernelUs,
      };
    },
    transactions: () => postgres?.transactions,
    close: async () => {
      await postgres?.close();
    },
  };
}

/** A broker's CPU over a phase, with the database's share where there is one. */
export interface BrokerCpuMeter {
  start(): Promise<void>;
  stop(): Promise<ServiceCpu>;
}

/** A baseline broker's meter from its user and system time (bare Aedes, Mosquitto): no database share. */
export function baselineCpuMeter(read: () => Promise<NodeJS.CpuUsage>): BrokerCpuMeter {
  let atStart: NodeJS.CpuUsage = { user: 0, system: 0 };
  return {
    start: async () => {
      atStart = await read();
    },
    stop: async () => {
      const now = await read();
      const kernelUs = now.system - atStart.system;
      return { totalUs: now.user - atStart.user + kernelUs, databaseUs: undefined, kernelUs };
    },
  };
}

/**
 * "336 µs (service 280 + PostgreSQL 56)" or "343 µs (of which the database thread 150)": a
 * figure per operation with the database's share, as measured by serviceCpuMeter.
 */
export function withDatabaseShare(
  totalUs: number,
  databaseUs: number | undefined,
  database: 'postgres' | 'embedded',
  digits = 0,
): string {
  const us = (n: number) => `${n.toFixed(digits)} µs`;
  if (databaseUs === undefined) return us(totalUs);
  return database === 'postgres'
    ? `${us(totalUs)} (service ${(totalUs - databaseUs).toFixed(digits)} + PostgreSQL ${databaseUs.toFixed(digits)})`
    : `${us(totalUs)} (of which the database thread ${databaseUs.toFixed(digits)})`;
}
