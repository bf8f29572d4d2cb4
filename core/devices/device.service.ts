import type { Knex } from 'knex';
import { z } from 'zod';
import type { ServiceDeps } from '../service-deps';
import { requireAdmin, type Actor } from '../shared/actor';
import { notFound } from '../shared/errors';
import { generateSecret, sha256Hex } from '../shared/secrets';
import { requireVersion } from '../shared/version';
import { appendEvents } from '../events/outbox';
import { historyCursor, historyPage, type HistoryPage } from './device-history';
import { keysetPage } from '../shared/cursor';
import { DEVICE_STATUSES, isValidSerial, type Device, type DeviceCredentials } from './device-types';
import {
  DEFAULT_DEVICE_SORT,
  DEVICE_SORT_FIELDS,
  deviceListCursor,
  type DeviceFilter,
  type DeviceSort,
  FEW_MATCHES,
} from './device-list';
import { UpdateDeviceInput, planDeviceUpdate } from './device-update';
import type { DeviceGateway } from './device-gateway';
import { DeviceCountCache } from './device-count-cache';
import {
  countDevicesAndQuota,
  selectDeviceJsonPage,
  selectDevicePage,
  type PageDb,
  selectQuota,
  type DevicePageQuery,
  type Keyed,
} from './store/device-list.store';
import {
  deleteDevice,
  deleteUpdatesOfDevice,
  findDeviceId,
  lockDevice,
  selectDeviceBySerial,
  shareLockAccount,
  updateDevice,
} from './store/devices.store';
import { replaceCredential } from './store/credentials.store';
import { finishRotation, selectOpenRotations } from './store/credential-rotations.store';
import { appendDeviceEvents, deleteHistoryOfDevice, selectHistoryPage } from './store/history.store';
import { raiseConfigVersionMark } from './store/config-version-marks.store';
import { revokeCertificatesOfDevice } from '../certificates/certificate-records';
import { resolveSiteRef } from '../sites/site.service';

export { UpdateDeviceInput } from './device-update';

export const MAX_PAGE_SIZE = 1000;
/**
 * Rows per keyset batch of the streamed (unpaged) list: memory stays flat with fleet size. Small
 * on purpose: the batches in hand are what survives each young-generation collection, and V8
 * doubles its young generation once enough has survived. At 1,000 rows the 100,000-device stream
 * grew the service's RSS by 64-72 MB (500: 64 MB), at 200 by 3-5 MB, in the same time and CPU
 * (bench/devices-list.bench.ts).
 */
export const STREAM_BATCH_SIZE = 200;

export const DeviceFilterInput = z.strictObject({
  model: z.string().min(1).max(64).optional(),
  status: z.enum(DEVICE_STATUSES).optional(),
  firmware: z.string().min(1).max(64).optional(),
  firmwareLt: z.string().min(1).max(64).optional(),
  q: z.string().min(1).max(64).optional(),
  /** A site id or name; an unknown one matches nothing. */
  site: z.string().min(1).max(100).optional(),
});
export type DeviceFilterInput = z.infer<typeof DeviceFilterInput>;

export type { DeviceSortField } from './device-list';

export const DeviceSortInput = z.strictObject({
  field: z.enum(DEVICE_SORT_FIELDS),
  direction: z.enum(['asc', 'desc']).default('asc'),
});

export const ListDevicesInput = z.strictObject({
  filter: DeviceFilterInput.default({}),
  limit: z.number().int().min(1).max(MAX_PAGE_SIZE),
  // A name-order cursor carries a name of up to 200 characters (up to ~1 KB in base64url).
  cursor: z.string().max(1200).optional(),
  /** Serial ascending when absent. A cursor only continues the order it was made in. */
  sort: DeviceSortInput.optional(),
});
export type ListDevicesInput = z.input<typeof ListDevicesInput>;

/** A page whose devices are JSON documents in the API's snake_case wire format (REST lists). */
export interface DeviceJsonPage {
  /** One JSON object per device, in serial order. */
  devices: string[];
  total: number;
  quota: number;
  nextCursor: string | null;
}

export interface DevicePage {
  devices: Device[];
  /** The cursor of each device (GraphQL edges), aligned with `devices`. */
  cursors: string[];
  total: number;
  quota: number;
  nextCursor: string | null;
}

export const HistoryInput = z.strictObject({
  limit: z.number().int().min(1).max(1000).default(50),
  cursor: z.string().max(200).optional(),
});

function toListFilter(filter: DeviceFilterInput): DeviceFilter {
  if (filter.firmwareLt !== undefined) requireVersion(filter.firmwareLt, 'firmware_lt');
  return filter;
}

/**
 * Reading and changing claimed devices. Every query is scoped to the actor's account: another
 * account's serial is "not found", exactly like one that does not exist.
 */
export class DeviceService {
  /** Recent list totals (see DeviceCountCache); claims and unclaims invalidate through `forgetCounts`. */
  private readonly counts: DeviceCountCache;
  /** Where list pages run (PageDb): searches on the pool, other pages with one plan each. */
  private readonly pages: PageDb;

  constructor(
    private readonly deps: ServiceDeps,
    private readonly area: {
      gateway: DeviceGateway;
      countCacheTtlMs?: number;
      /** Keeps the warranty evidence of an unclaimed device for its owner (core/health/warranty.ts). */
      warranty?: {
        keepOnUnclaim(trx: Knex.Transaction, input: { accountId: string; deviceId: string }): Promise<void>;
      };
      /**
       * The OTA engine: an unfinished deployment whose updates an unclaim deleted is judged again
       * at once (it may be complete now, or its batch done) instead of at the sweep's next look.
       */
      deployments?: { updatesRemoved(deploymentIds: string[]): void };
    },
  ) {
    this.counts = new DeviceCountCache({ ttlMs: area.countCacheTtlMs ?? 1000 });
    this.pages = { knex: deps.knex, plannedOnce: deps.plannedOnce ?? deps.knex };
  }

  /** The account's devices changed in number or attributes: recount on the next list. */
  forgetCounts(accountId: string): void {
    this.counts.invalidate(accountId);
  }

  async get(actor: Actor, input: { serial: string }): Promise<Device> {
    if (!isValidSerial(input.serial)) throw notFound('Device');
    const device = await selectDeviceBySerial(this.deps.knex, { accountId: actor.accountId, serial: input.serial });
    if (!device) throw notFound('Device');
    return device;
  }

  /** One page in the requested order (serial by default); `total` counts every match of the filter. */
  async list(actor: Actor, raw: ListDevicesInput): Promise<DevicePage> {
    const page = await this.page(actor, raw, (query) => selectDevicePage(this.pages, query));
    return {
      devices: page.rows,
      cursors: page.cursors,
      total: page.total,
      quota: page.quota,
      nextCursor: page.nextCursor,
    };
  }

  /** `list` with each device as its wire-format JSON document, rendered by the database. */
  async listJson(actor: Actor, raw: ListDevicesInput): Promise<DeviceJsonPage> {
    const page = await this.page(actor, raw, (query) => selectDeviceJsonPage(this.pages, query));
    return { devices: page.rows, total: page.total, quota: page.quota, nextCursor: page.nextCursor };
  }

  private async page<T>(
    actor: Actor,
    raw: ListDevicesInput,
    fetch: (query: DevicePageQuery) => Promise<Array<Keyed<T>>>,
  ): Promise<{ rows: T[]; cursors: string[]; total: number; quota: number; nextCursor: string | null }> {
    const input = ListDevicesInput.parse(raw);
    const filter = toListFilter(input.filter);
    const sort: DeviceSort = input.sort ?? DEFAULT_DEVICE_SORT;
    const cursor = deviceListCursor(sort);
    const after = input.cursor === undefined ? null : cursor.decode(input.cursor);
    const filterKey = JSON.stringify([
      filter.model,
      filter.status,
      filter.firmware,
      filter.firmwareLt,
      filter.q,
      filter.site,
    ]);
    const counted = () =>
      this.counts.load(actor.accountId, filterKey, () =>
        countDevicesAndQuota(this.deps.knex, { accountId: actor.accountId, filter }),
      );
    // A search is counted first: how many devices it matches decides how its page is read
    // (DevicePageQuery.fewMatches). Otherwise page and count run side by side (two pool
    // connections on PostgreSQL).
    const searched = filter.q !== undefined && filter.q !== '' ? await counted() : undefined;
    const [rows, counts] = await Promise.all([
      fetch({
        accountId: actor.accountId,
        filter,
        afterSerial: after?.serial ?? null,
        afterKey: after?.sortKey ?? null,
        limit: input.limit + 1,
        sort,
        ...(searched !== undefined && searched.total <= FEW_MATCHES ? { fewMatches: true } : {}),
      }),
      searched ?? counted(),
    ]);
    const page = keysetPage(rows, input.limit, (r) => cursor.encode({ serial: r.serial, sortKey: r.sortKey }));
    return {
      rows: page.items.map((r) => r.item),
      cursors: page.cursors,
      total: counts.total,
      quota: counts.quota,
      nextCursor: page.nextCursor,
    };
  }

  /**
   * Every matching device, in keyset batches (for the streamed list): memory holds one batch at
   * a time whatever the fleet size. Batches are separate statements, so a device claimed or
   * unclaimed meanwhile may or may not appear; each device appears at most once.
   */
  async listAll(
    actor: Actor,
    raw: { filter?: DeviceFilterInput; batchSize?: number },
  ): Promise<{ quota: number; batches: AsyncGenerator<Device[]> }> {
    return this.batches(actor, raw, (query) => selectDevicePage(this.pages, query));
  }

  /** `listAll` with each device as its wire-format JSON document (the streamed REST list). */
  async listAllJson(
    actor: Actor,
    raw: { filter?: DeviceFilterInput; batchSize?: number },
  ): Promise<{ quota: number; batches: AsyncGenerator<string[]> }> {
    return this.batches(actor, raw, (query) => selectDeviceJsonPage(this.pages, query));
  }

  private async batches<T>(
    actor: Actor,
    raw: { filter?: DeviceFilterInput; batchSize?: number },
    fetch: (query: DevicePageQuery) => Promise<Array<Keyed<T>>>,
  ): Promise<{ quota: number; batches: AsyncGenerator<T[]> }> {
    const filter = toListFilter(DeviceFilterInput.parse(raw.filter ?? {}));
    const batchSize = Math.min(Math.max(raw.batchSize ?? STREAM_BATCH_SIZE, 1), 10_000);
    const quota = await selectQuota(this.deps.knex, { accountId: actor.accountId });
    const fetchAfter = (afterSerial: string | null) =>
      fetch({ accountId: actor.accountId, filter, afterSerial, limit: batchSize });
    async function* batches(): AsyncGenerator<T[]> {
      // One batch ahead: the next query runs while the caller writes this one (at most two
      // batches in memory).
      let next: Promise<Array<Keyed<T>>> | null = fetchAfter(null);
      try {
        while (next) {
          const rows: Array<Keyed<T>> = await next;
          next = rows.length === batchSize ? fetchAfter(rows[rows.length - 1]!.serial) : null;
          if (rows.length > 0) yield rows.map((r) => r.item);
        }
      } finally {
        // Abandoned early (client gone): let a query still in flight finish quietly.
        next?.catch(() => undefined);
      }
    }
    return { quota, batches: batches() };
  }

  /**
   * Rename, tag and configure (merge semantics). A configuration change bumps the desired
   * version and is pushed to the device after commit (retained, so it also reaches it later).
   */
  async update(actor: Actor, input: { serial: string; patch: UpdateDeviceInput }): Promise<Device> {
    requireAdmin(actor);
    const patch = UpdateDeviceInput.parse(input.patch);
    if (!isValidSerial(input.serial)) throw notFound('Device');
    const pushed = await this.deps.transaction(async (trx) => {
      const device = await lockDevice(trx, { accountId: actor.accountId, serial: input.serial });
      if (!device) throw notFound('Device');
      // Resolved inside the transaction, scoped to the account: another account's site is not found.
      const site =
        patch.site === undefined || patch.site === null
          ? patch.site
          : await resolveSiteRef(trx, actor.accountId, patch.site, 'site');
      const plan = planDeviceUpdate(device, patch, { accountId: actor.accountId, principal: actor.principal }, site);
      if (plan.changes.length === 0) return null;
      const now = this.deps.clock.now();
      await updateDevice(trx, { deviceId: device.id, update: plan, now });
      await appendDeviceEvents(trx, { now, events: plan.history });
      await appendEvents(trx, this.deps.clock, [
        {
          accountId: actor.accountId,
          type: 'device.updated',
          subject: device.serial,
          data: {
            serial: device.serial,
            device_id: device.id,
            changes: plan.changes,
            config_version: plan.config?.version ?? device.desiredConfigVersion,
          },
        },
      ]);
      return plan.config ?? null;
    });
    this.counts.invalidate(actor.accountId);
    if (pushed) {
      // After commit: the device must never receive a configuration that rolled back.
      await this.area.gateway.publishConfig(input.serial, pushed).catch((error: unknown) => {
        this.deps.logger.warn(
          { err: error, serial: input.serial },
          'could not push configuration now; the device receives it on its next connection',
        );
      });
    }
    return this.get(actor, { serial: input.serial });
  }

  /**
   * The emergency rotation (a leaked secret): a new MQTT password, shown once; the old one is
   * refused at once and the session dropped on every process. A planned rotation still pending
   * ends with it (`revoked`): its password never becomes valid. The planned path is
   * CredentialRotationService.startPasswordRotation.
   */
  async rotateCredentials(actor: Actor, input: { serial: string }): Promise<DeviceCredentials> {
    requireAdmin(actor);
    if (!isValidSerial(input.serial)) throw notFound('Device');
    const password = generateSecret('');
    await this.deps.transaction(async (trx) => {
      const device = await lockDevice(trx, { accountId: actor.accountId, serial: input.serial });
      if (!device) throw notFound('Device');
      const now = this.deps.clock.now();
      await replaceCredential(trx, { deviceId: device.id, secretHash: sha256Hex(password), now });
      const pending = await selectOpenRotations(trx, { deviceId: device.id, kind: 'password', lock: true });
      for (const rotation of pending) await finishRotation(trx, { rotationId: rotation.id, outcome: 'revoked', now });
      const data = {
        kind: 'password',
        mode: 'emergency',
        by: actor.principal,
        ...(pending.length > 0 ? { revokes: pending.map((r) => r.id) } : {}),
      };
      await appendDeviceEvents(trx, {
        now,
        events: [{ accountId: actor.accountId, deviceId: device.id, type: 'credentials_rotated', data }],
      });
      await appendEvents(trx, this.deps.clock, [
        {
          accountId: actor.accountId,
          type: 'device.credentials_rotated',
          subject: device.serial,
          data: { serial: device.serial, device_id: device.id, ...data },
        },
      ]);
    });
    this.area.gateway.disconnect(input.serial, 'credentials rotated');
    return { serial: input.serial, username: input.serial, password };
  }

  /**
   * Unclaim: the device, its credentials, history and updates are deleted, its certificates
   * revoked and its connection dropped on every process; the serial can be claimed again.
   * Nothing is credited: the claim charge stays in the ledger, but the quota slot is free again.
   */
  async unclaim(actor: Actor, input: { serial: string }): Promise<void> {
    requireAdmin(actor);
    if (!isValidSerial(input.serial)) throw notFound('Device');
    const deployments = await this.deps.transaction(async (trx) => {
      // The account lock orders this after any deployment being scheduled for the account (it
      // holds the lock while it writes update rows for the devices it read), so no update row
      // outlives its device: updates and history carry no foreign key (migration
      // 20261123000000_lean_update_targets) and are deleted here.
      await shareLockAccount(trx, { accountId: actor.accountId });
      const device = await lockDevice(trx, { accountId: actor.accountId, serial: input.serial });
      if (!device) throw notFound('Device');
      await this.area.warranty?.keepOnUnclaim(trx, { accountId: actor.accountId, deviceId: device.id });
      const updatedBy = await deleteUpdatesOfDevice(trx, { deviceId: device.id });
      await deleteHistoryOfDevice(trx, { deviceId: device.id });
      // Certificates stay, revoked: whoever claims the serial next must not inherit them.
      await revokeCertificatesOfDevice(trx, { deviceId: device.id, now: this.deps.clock.now(), reason: 'unclaimed' });
      // Whoever claims the serial next starts above every version this device was given: a
      // module that keeps the version it applied last would otherwise ignore its new owner.
      await raiseConfigVersionMark(trx, { serial: device.serial, version: device.desiredConfigVersion });
      await deleteDevice(trx, { deviceId: device.id });
      await appendEvents(trx, this.deps.clock, [
        {
          accountId: actor.accountId,
          type: 'device.unclaimed',
          subject: device.serial,
          data: { serial: device.serial, device_id: device.id, by: actor.principal },
        },
      ]);
      return updatedBy;
    });
    this.counts.invalidate(actor.accountId);
    this.area.gateway.disconnect(input.serial, 'unclaimed');
    // The previous owner's retained configuration and queued messages must not reach the next
    // owner's device (test/broker/config.test.ts). After the commit: the device is gone either way.
    await this.area.gateway
      .forget(input.serial)
      .catch((err: unknown) =>
        this.deps.logger.error(
          { err, serial: input.serial },
          'clearing the broker state of an unclaimed device failed',
        ),
      );
    if (deployments.length > 0) this.area.deployments?.updatesRemoved(deployments);
  }

  /** Status, firmware, configuration, claim and update events, newest first. */
  async history(actor: Actor, input: { serial: string; limit?: number; cursor?: string }): Promise<HistoryPage> {
    const page = HistoryInput.parse({ limit: input.limit, cursor: input.cursor });
    if (!isValidSerial(input.serial)) throw notFound('Device');
    const deviceId = await findDeviceId(this.deps.knex, { accountId: actor.accountId, serial: input.serial });
    if (deviceId === null) throw notFound('Device');
    const beforeId = page.cursor === undefined ? null : historyCursor.decode(page.cursor);
    const rows = await selectHistoryPage(this.deps.knex, {
      accountId: actor.accountId,
      deviceId,
      beforeId,
      limit: page.limit + 1,
    });
    return historyPage(rows, page.limit);
  }
}
