import type { Knex } from 'knex';
import type { Actor } from '../shared/actor';

/**
 * The seam between claiming and the OTA engine (docs/rest-devices.md: "claiming schedules that update
 * for the claimed devices; it waits until each device connects"). The claim service calls both
 * methods inside its transaction, so a claim and its deployment commit or roll back together.
 * The deployment service implements it; `services.ts` injects it into the ClaimService.
 */
export interface ClaimFirmwareScheduler {
  /** The firmware version of that model in the account, or null (the claim answers 422 version_not_found). */
  resolveVersion(
    trx: Knex.Transaction,
    input: { accountId: string; modelId: string; version: string },
  ): Promise<{ id: string } | null>;
  /**
   * Schedules `version` for the freshly claimed devices (queued until each connects); returns
   * the deployment id, or null when nothing was scheduled.
   */
  scheduleForClaim(trx: Knex.Transaction, input: ClaimSchedule): Promise<{ deploymentId: string } | null>;
}

/** The firmware a claim installs, and on which freshly claimed devices. */
export interface ClaimSchedule {
  actor: Actor;
  modelId: string;
  firmwareVersionId: string;
  version: string;
  devices: Array<{ id: string; serial: string }>;
}
