import { z } from 'zod';
import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import { requireAdmin, type Actor } from '../shared/actor';
import { DomainError, type FieldError } from '../shared/errors';
import { newId } from '../shared/ids';
import { generateSecret, sha256Hex } from '../shared/secrets';
import { requireVersion, versionKey } from '../shared/version';
import { ownValue, userKeyedRecord } from '../shared/user-keyed';
import { appendEvents } from '../events/outbox';
import type { ModelService } from '../models/model.service';
import type { AllocationService, Allocation } from '../accounts/allocation.service';
import { DEFAULT_DEVICE_CONFIG } from './device-config';
import { isValidSerial, type Device, type DeviceCredentials } from './device-types';
import type { ClaimFirmwareScheduler } from './claim-firmware';
import { insertClaimedDevices, selectDevicesByIds, selectTakenSerials } from './store/devices.store';
import { insertCredentials } from './store/credentials.store';
import { appendDeviceEvents } from './store/history.store';
import { Csr, type DeviceCertificate, type DeviceCertificateService } from '../certificates/device-certificate.service';
import { insertCertificates } from '../certificates/certificate-records';
import type { IssuedCertificate } from '../certificates/certificate-issuer';
import { resolveSiteRef } from '../sites/site.service';

export const MAX_SERIALS_PER_CLAIM = 1000;

const Name = z.string().trim().min(1).max(200);

/**
 * Claim request, two forms (docs/rest-devices.md):
 * - batch: `{serials, model, firmware?, names?, csrs?}` (names: optional map serial -> name;
 *   csrs: optional map serial -> PEM certificate request, signed into device certificates);
 * - single: `{serial, model, firmware?, name?}`.
 * Serial format is checked by the service (not the schema) so that every offending serial is
 * listed in one answer. A device's name defaults to its serial.
 */
export const ClaimDevicesInput = z
  .strictObject({
    serials: z
      .array(z.string())
      .min(1)
      .max(MAX_SERIALS_PER_CLAIM, `at most ${MAX_SERIALS_PER_CLAIM} serials per claim`)
      .optional(),
    // Keyed by serial: `constructor` and `__proto__` are serials too (shared/user-keyed.ts).
    names: userKeyedRecord(Name).optional(),
    csrs: userKeyedRecord(Csr).optional(),
    serial: z.string().optional(),
    name: Name.optional(),
    model: z.string().min(1).max(64),
    firmware: z.string().min(1).max(64).optional(),
    /** Site id or name of the account: every claimed device is assigned to it. */
    site: z.string().trim().min(1).max(100).optional(),
  })
  .superRefine((input, ctx) => {
    if ((input.serials === undefined) === (input.serial === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['serials'],
        message: 'give either "serials" (batch) or "serial" (single device)',
      });
    }
    if (input.name !== undefined && input.serial === undefined)
      ctx.addIssue({ code: 'custom', path: ['name'], message: 'only with "serial"; use "names" in the batch form' });
    if (input.names !== undefined) {
      if (input.serials === undefined)
        ctx.addIssue({ code: 'custom', path: ['names'], message: 'only with "serials"' });
      const listed = new Set(input.serials ?? []);
      for (const key of Object.keys(input.names)) {
        if (!listed.has(key))
          ctx.addIssue({ code: 'custom', path: ['names', key], message: 'is not one of the claimed serials' });
      }
    }
    if (input.csrs !== undefined) {
      if (input.serials === undefined) ctx.addIssue({ code: 'custom', path: ['csrs'], message: 'only with "serials"' });
      const listed = new Set(input.serials ?? []);
      for (const key of Object.keys(input.csrs)) {
        if (!listed.has(key))
          ctx.addIssue({ code: 'custom', path: ['csrs', key], message: 'is not one of the claimed serials' });
      }
    }
  });
export type ClaimDevicesInput = z.input<typeof ClaimDevicesInput>;

export type ClaimOffenceReason = 'invalid' | 'duplicate' | 'already_claimed';

export interface ClaimResult {
  claimed: number;
  /** `certificate`: signed from the device's CSR, when the claim carried one for it. */
  devices: Array<{ device: Device; credentials: DeviceCredentials; certificate?: DeviceCertificate }>;
  /** Deployment that installs the claim's firmware; null when none was scheduled. */
  deploymentId: string | null;
  charged: { amountMinor: number; currency: string };
  allocation: Allocation;
}

export interface ClaimServiceDeps {
  models: ModelService;
  allocation: AllocationService;
  firmware: ClaimFirmwareScheduler;
  /** Signs the claim's CSRs; a claim with `csrs` is refused (service_unavailable) without it. */
  certificates?: DeviceCertificateService;
  /** Called after a claim committed (the device list drops its cached totals). */
  onClaimed?: (accountId: string) => void;
}

/**
 * Claiming binds devices to the account, all or nothing: an invalid, duplicated or already
 * claimed serial, or a batch past the quota or the budget, answers 422 and writes nothing.
 * Every write is one statement per table, so a claim of 1,000 devices is a handful of round trips.
 */
export class ClaimService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly area: ClaimServiceDeps,
  ) {}

  /**
   * `unitOfWork`: a transaction of the caller's to claim in (the idempotency service stores the
   * answer in the same one, so a claim and its stored answer commit together or not at all).
   */
  async claim(
    actor: Actor,
    raw: ClaimDevicesInput,
    options: { unitOfWork?: Knex.Transaction } = {},
  ): Promise<ClaimResult> {
    requireAdmin(actor);
    const input = ClaimDevicesInput.parse(raw);
    const items = input.serials
      ? input.serials.map((serial) => ({ serial, name: ownValue(input.names, serial) ?? serial }))
      : [{ serial: input.serial!, name: input.name ?? input.serial! }];
    if (input.firmware !== undefined) requireVersion(input.firmware, 'firmware');

    const offending = new Map<string, ClaimOffenceReason>();
    const seen = new Set<string>();
    for (const { serial } of items) {
      if (!isValidSerial(serial)) offending.set(serial, 'invalid');
      else if (seen.has(serial)) offending.set(serial, 'duplicate');
      seen.add(serial);
    }
    const validSerials = [...seen].filter((s) => isValidSerial(s));

    // Signed before the transaction (all or nothing: one bad CSR refuses the claim), unless the
    // serials are already refused: the answer then names them, as without CSRs.
    const certificates =
      input.csrs !== undefined && offending.size === 0
        ? await this.signCsrs(input.csrs)
        : new Map<string, IssuedCertificate>();

    const outer = options.unitOfWork;
    const claimIn = (trx: Knex.Transaction) =>
      this.claimInTransaction(trx, actor, { input, items, offending, validSerials, certificates });
    try {
      // In the caller's transaction, a savepoint: a lost race for a serial (below) rolls back the
      // claim's writes and leaves the caller's transaction usable for the answer.
      const result = outer ? await outer.transaction(claimIn) : await this.deps.transaction(claimIn);
      if (outer)
        void outer.executionPromise.then(
          () => this.area.onClaimed?.(actor.accountId),
          () => undefined,
        );
      else this.area.onClaimed?.(actor.accountId);
      return result;
    } catch (error) {
      // Another account claimed one of these serials between our check and our insert.
      if (
        (error as { code?: string; constraint?: string }).code === '23505' &&
        (error as { constraint?: string }).constraint === 'devices_serial_unique'
      ) {
        const taken = await selectTakenSerials(outer ?? this.deps.knex, { serials: validSerials });
        for (const serial of taken) offending.set(serial, 'already_claimed');
        throw claimRejected(offending);
      }
      throw error;
    }
  }

  private signCsrs(csrs: Record<string, string>): Promise<Map<string, IssuedCertificate>> {
    if (!this.area.certificates)
      throw new DomainError('service_unavailable', 'This process cannot sign device certificates.');
    return this.area.certificates.signForClaim(csrs);
  }

  private async claimInTransaction(
    trx: Knex.Transaction,
    actor: Actor,
    ctx: {
      input: z.output<typeof ClaimDevicesInput>;
      items: Array<{ serial: string; name: string }>;
      offending: Map<string, ClaimOffenceReason>;
      validSerials: string[];
      certificates: Map<string, IssuedCertificate>;
    },
  ): Promise<ClaimResult> {
    const { input, items, offending } = ctx;
    // Serializes claims of this account from here on (20 racing claims take turns).
    const snapshot = await this.area.allocation.lockForClaim(trx, actor.accountId);
    const model = await this.area.models.requireByName(actor, input.model, trx);
    const site = input.site === undefined ? null : await resolveSiteRef(trx, actor.accountId, input.site, 'site');
    let firmwareVersionId: string | null = null;
    if (input.firmware !== undefined) {
      const version = await this.area.firmware.resolveVersion(trx, {
        accountId: actor.accountId,
        modelId: model.id,
        version: input.firmware,
      });
      if (!version) {
        throw new DomainError(
          'version_not_found',
          `Firmware ${input.firmware} is not a version of model "${model.name}".`,
          {
            errors: [{ field: 'firmware', message: 'is not an uploaded version of this model' }],
          },
        );
      }
      firmwareVersionId = version.id;
    }

    // Any account: a serial is claimed once. The answer never says by whom.
    const taken = await selectTakenSerials(trx, { serials: ctx.validSerials });
    for (const serial of taken) if (!offending.has(serial)) offending.set(serial, 'already_claimed');
    if (offending.size > 0) throw claimRejected(offending);

    const n = items.length;
    const { account } = snapshot;
    const available = Math.max(0, account.quota - snapshot.provisioned);
    if (n > available) {
      throw new DomainError(
        'quota_exceeded',
        `Claiming ${n} devices would exceed the quota of ${account.quota} (${available} available).`,
        {
          details: {
            quota: account.quota,
            provisioned: snapshot.provisioned,
            available,
            requested: n,
            offending_serials: items.slice(available).map((i) => i.serial),
          },
        },
      );
    }
    const remainingMinor = Math.max(0, account.budgetMinor - snapshot.spentMinor);
    const costMinor = account.unitPriceMinor * n;
    if (costMinor > remainingMinor) {
      const affordable = account.unitPriceMinor > 0 ? Math.floor(remainingMinor / account.unitPriceMinor) : n;
      throw new DomainError(
        'budget_exceeded',
        `Claiming ${n} devices costs ${costMinor / 100} ${account.currency}; ${remainingMinor / 100} remain in the budget.`,
        {
          details: {
            currency: account.currency,
            budget: account.budgetMinor / 100,
            spent: snapshot.spentMinor / 100,
            remaining: remainingMinor / 100,
            unit_price: account.unitPriceMinor / 100,
            required: costMinor / 100,
            requested: n,
            offending_serials: items.slice(affordable).map((i) => i.serial),
          },
        },
      );
    }

    const now = this.deps.clock.now();
    const claimId = newId();
    const devices = items.map((item) => ({
      id: newId(),
      serial: item.serial,
      name: item.name,
      password: generateSecret(''),
    }));
    await insertClaimedDevices(trx, {
      accountId: actor.accountId,
      modelId: model.id,
      // Until the device reports, version comparisons (firmware_lt in lists, dry runs and
      // deploys) take it as running what its claim installs.
      firmwareKey: input.firmware !== undefined ? versionKey(input.firmware) : null,
      config: DEFAULT_DEVICE_CONFIG,
      now,
      devices,
      siteId: site?.id ?? null,
    });
    await insertCredentials(trx, {
      now,
      credentials: devices.map((d) => ({ deviceId: d.id, secretHash: sha256Hex(d.password) })),
    });
    const withCertificate = devices
      .filter((d) => ctx.certificates.has(d.serial))
      .map((d) => ({ deviceId: d.id, issued: ctx.certificates.get(d.serial)! }));
    const recorded = await insertCertificates(trx, { accountId: actor.accountId, now, certificates: withCertificate });
    const certificateBySerial = new Map(recorded.map((c) => [c.serial, c]));
    await appendDeviceEvents(trx, {
      now,
      events: [
        ...devices.map((d) => ({
          accountId: actor.accountId,
          deviceId: d.id,
          type: 'claimed' as const,
          data: {
            model: model.name,
            firmware: input.firmware ?? null,
            by: actor.principal,
            claim_id: claimId,
            ...(site ? { site: { id: site.id, name: site.name } } : {}),
          },
        })),
        ...withCertificate.map(({ deviceId, issued }) => ({
          accountId: actor.accountId,
          deviceId,
          type: 'certificate_issued' as const,
          data: {
            fingerprint_sha256: issued.fingerprintSha256,
            not_after: issued.notAfter.toISOString(),
            key_algorithm: issued.keyAlgorithm,
            by: actor.principal,
            claim_id: claimId,
          },
        })),
      ],
    });
    await appendEvents(
      trx,
      this.deps.clock,
      devices.map((d) => ({
        accountId: actor.accountId,
        type: 'device.claimed',
        subject: d.serial,
        data: {
          serial: d.serial,
          device_id: d.id,
          model: model.name,
          firmware: input.firmware ?? null,
          claim_id: claimId,
        },
      })),
    );
    const charge = await this.area.allocation.chargeClaim(trx, { snapshot, devices: n, reference: `claim:${claimId}` });
    let deploymentId: string | null = null;
    if (firmwareVersionId !== null) {
      const scheduled = await this.area.firmware.scheduleForClaim(trx, {
        actor,
        modelId: model.id,
        firmwareVersionId,
        version: input.firmware!,
        devices: devices.map((d) => ({ id: d.id, serial: d.serial })),
      });
      deploymentId = scheduled?.deploymentId ?? null;
    }
    const stored = await selectDevicesByIds(trx, { accountId: actor.accountId, ids: devices.map((d) => d.id) });
    const byId = new Map(stored.map((d) => [d.id, d]));
    const allocation = await this.area.allocation.get(actor, trx);
    return {
      claimed: n,
      devices: devices.map((d) => {
        const certificate = certificateBySerial.get(d.serial);
        return {
          device: byId.get(d.id)!,
          credentials: { serial: d.serial, username: d.serial, password: d.password },
          ...(certificate ? { certificate } : {}),
        };
      }),
      deploymentId,
      charged: { amountMinor: charge.amountMinor, currency: account.currency },
      allocation,
    };
  }
}

function claimRejected(offending: Map<string, ClaimOffenceReason>): DomainError {
  const list = [...offending].map(([serial, reason]) => ({ serial, reason }));
  const counts = { invalid: 0, duplicate: 0, already_claimed: 0 };
  for (const o of list) counts[o.reason] += 1;
  const parts = [
    counts.invalid ? `${counts.invalid} invalid (1 to 64 characters of A-Z a-z 0-9 . _ : -)` : '',
    counts.duplicate ? `${counts.duplicate} duplicated in the request` : '',
    counts.already_claimed ? `${counts.already_claimed} already claimed` : '',
  ].filter(Boolean);
  const errors: FieldError[] = list
    .slice(0, 100)
    .map((o) => ({ field: 'serials', message: `${o.serial}: ${o.reason.replace('_', ' ')}` }));
  return new DomainError('claim_rejected', `Nothing was claimed: ${parts.join(', ')}.`, {
    errors,
    details: { offending_serials: list },
  });
}
