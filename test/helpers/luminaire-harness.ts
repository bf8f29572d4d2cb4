import { startServiceHarness, type HarnessAccount, type ServiceHarness } from './service-harness';
import type { Clock, ManualClock } from '#core/shared/clock';
import { LuminaireIngest } from '#core/luminaire/luminaire-ingest';
import { readLuminaire } from '#protocol/luminaire-fields';
import { createLogger } from '#core/logger';

export interface LuminaireHarness {
  harness: ServiceHarness;
  ingest: LuminaireIngest;
  /** One account per entry of `serials`, in order, each with model LX-200 and those devices claimed. */
  accounts: HarnessAccount[];
  /** serial -> device id, every account's. */
  ids: Map<string, string>;
  /**
   * A luminaire message as the broker hands it on: read at the clock's time, recorded, flushed.
   * The payload goes as it is: give `at` to set the device's clock.
   */
  send: (account: HarnessAccount, serial: string, payload: Record<string, unknown>) => Promise<void>;
}

/**
 * One luminaire message per device, as the broker hands them on (read at the clock's time, the
 * payloads as given: give `at` to set the device's clock), recorded and flushed together.
 */
export async function recordReadings(
  ingest: LuminaireIngest,
  clock: Clock,
  input: { accountId: string; ids: ReadonlyMap<string, string>; readings: Record<string, Record<string, unknown>> },
): Promise<void> {
  const applied: Array<Promise<unknown>> = [];
  for (const [serial, payload] of Object.entries(input.readings)) {
    const read = readLuminaire(JSON.stringify(payload), clock.now());
    if (!read.ok) throw new Error(read.reason);
    applied.push(
      ingest.record({
        accountId: input.accountId,
        deviceId: input.ids.get(serial)!,
        serial,
        values: read.values,
        at: read.at,
        badClock: read.badClock,
        refused: read.refused,
      }),
    );
  }
  await ingest.flush();
  await Promise.all(applied);
}

/** A service harness on `clock` with a luminaire ingest of its own and claimed devices to send readings for. */
export async function startLuminaireHarness(input: {
  clock: ManualClock;
  serials: string[][];
}): Promise<LuminaireHarness> {
  const { clock } = input;
  const harness = await startServiceHarness({ clock });
  const ingest = new LuminaireIngest({
    deps: { knex: harness.database.knex, clock, logger: createLogger('silent') },
    partitions: harness.services.luminairePartitions,
  });
  const accounts: HarnessAccount[] = [];
  const ids = new Map<string, string>();
  for (const serials of input.serials) {
    const account = await harness.createAccount();
    accounts.push(account);
    await harness.services.models.register(account.admin, { name: 'LX-200', description: '' });
    await harness.services.claims.claim(account.admin, { serials, model: 'LX-200' });
    for (const serial of serials) ids.set(serial, (await harness.services.devices.get(account.admin, { serial })).id);
  }
  return {
    harness,
    ingest,
    accounts,
    ids,
    send: (account, serial, payload) =>
      recordReadings(ingest, clock, { accountId: account.accountId, ids, readings: { [serial]: payload } }),
  };
}
