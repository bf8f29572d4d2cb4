import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';

const RETRYABLE = new Set(['40P01', '40001']);

/**
 * Runs `work` again (up to 4 times, with a short jittered pause) when PostgreSQL aborted it for a
 * deadlock or a serialization failure.
 */
export async function retryOnLockConflict<T>(deps: Pick<ServiceDeps, 'logger'>, work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (!code || !RETRYABLE.has(code) || attempt >= 4) throw err;
      deps.logger.debug({ code, attempt }, 'OTA statement retried after a lock conflict');
      await new Promise((r) => setTimeout(r, 10 * attempt + Math.random() * 20));
    }
  }
}

/**
 * `deps.transaction` that runs the unit again on a lock conflict (retryOnLockConflict): the OTA
 * engine's transactions touch devices rows that the heartbeat flush updates in batches too.
 */
export function retryingTransaction(deps: ServiceDeps): ServiceDeps['transaction'] {
  return <T>(work: (trx: Knex.Transaction) => Promise<T>): Promise<T> =>
    retryOnLockConflict(deps, () => deps.transaction(work));
}
