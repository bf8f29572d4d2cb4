import type { ServiceDeps } from '../service-deps';
import { LookupBatcher } from '../shared/lookup-batcher';
import { selectDesiredConfigs, type StoredDesiredConfig } from './store/desired-config.store';

/**
 * The desired configuration a device is sent once on each connection (the broker asks when the
 * connection's `config` subscription is in place). Read then rather than at authentication, so a
 * change committed while the device was connecting is not overtaken by the older copy. Lookups
 * within a few milliseconds share one query (LOOKUP_WINDOW_MS), as the credential lookups of a
 * reconnect storm do.
 */
export class DesiredConfigs {
  private readonly lookups: LookupBatcher<StoredDesiredConfig>;

  constructor(deps: Pick<ServiceDeps, 'knex' | 'logger'>) {
    this.lookups = new LookupBatcher({
      fetch: (deviceIds) => selectDesiredConfigs(deps.knex, { deviceIds }),
      keyOf: (r) => r.deviceId,
      logger: deps.logger,
      what: 'desired configuration lookup',
    });
  }

  /** Null when the device is gone (unclaimed) or not the account's, or has no configuration yet. */
  async desired(input: {
    accountId: string;
    deviceId: string;
  }): Promise<{ version: number; config: Record<string, unknown> } | null> {
    const row = await this.lookups.lookup(input.deviceId);
    if (!row || row.accountId !== input.accountId || row.version < 1) return null;
    return { version: row.version, config: row.config };
  }
}
