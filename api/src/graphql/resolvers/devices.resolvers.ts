import { z } from 'zod';
import { DomainError } from '#core/shared/errors';
import { UPDATE_STATES, isFinal, type UpdateState } from '#core/deployments/deployment-types';
import type { DeviceConfigPatch } from '#core/devices/device-config';
import { ClaimDevicesInput, type ClaimResult } from '#core/devices/claim.service';
import { UpdateDeviceInput, type DeviceSortField } from '#core/devices/device.service';
import type {
  DeviceConfigInput,
  DeviceFilter,
  DeviceOrderField,
  Resolvers,
  ResolversParentTypes,
} from '../generated/resolvers-types';
import type { DeviceUpdateParent } from '../mappers';
import { MAX_DEVICE_PAGE } from '../limits';
import { connection, liveField, money, oneOf, orDefault, orNull } from './presenters';
import { presentCertificate } from './certificates.resolvers';
import { MESSAGE_REFUSAL_REASONS } from '#core/devices/device-refusals';
import { HEARTBEAT_FIELDS } from '#protocol/heartbeat-fields';

/** GraphQL's filter to the service's (which also knows firmwareLt; `text` is its `q`). */
export function toServiceFilter(filter: DeviceFilter | null | undefined) {
  const f = filter ?? {};
  return {
    ...(f.model != null ? { model: f.model } : {}),
    ...(f.status != null ? { status: f.status } : {}),
    ...(f.firmware != null ? { firmware: f.firmware } : {}),
    ...(f.text != null && f.text !== '' ? { q: f.text } : {}),
    ...(f.site != null && f.site !== '' ? { site: f.site } : {}),
  };
}

/** DeviceOrderField values are the service's sort fields in upper case. */
const SORT_FIELDS: Record<DeviceOrderField, DeviceSortField> = {
  SERIAL: 'serial',
  NAME: 'name',
  MODEL: 'model',
  FIRMWARE: 'firmware',
  STATUS: 'status',
  LAST_SEEN: 'last_seen',
  IP: 'ip',
};

/** camelCase input to the snake_case configuration keys the domain and the device protocol use. */
function toConfigPatch(input: DeviceConfigInput): DeviceConfigPatch {
  return {
    ...(input.heartbeatIntervalS != null ? { heartbeat_interval_s: input.heartbeatIntervalS } : {}),
    ...(input.dimLevel != null ? { dim_level: input.dimLevel } : {}),
    ...(input.powerOnLevel != null ? { power_on_level: input.powerOnLevel } : {}),
    ...(input.timezone != null ? { timezone: input.timezone } : {}),
    ...(input.luminaireIntervalS != null ? { luminaire_interval_s: input.luminaireIntervalS } : {}),
    // null removes the window (the only key that may be removed).
    ...(input.maintenanceWindow !== undefined ? { maintenance_window: input.maintenanceWindow } : {}),
  };
}

/**
 * The JSON arguments (free-form in the schema), parsed with the domain's own schemas for them
 * before they reach the service as the maps it declares; the service checks everything else.
 */
const ClaimJson = z.object({ names: ClaimDevicesInput.shape.names, csrs: ClaimDevicesInput.shape.csrs });
const UpdateJson = z.object({ tags: UpdateDeviceInput.shape.tags });

const updateState = (u: DeviceUpdateParent): UpdateState => oneOf(UPDATE_STATES, u.state, 'Update state');

export function presentClaim(result: ClaimResult): ResolversParentTypes['ClaimDevicesPayload'] {
  return {
    count: result.claimed,
    devices: result.devices.map((d) => d.device),
    credentials: result.devices.map((d) => d.credentials),
    certificates: result.devices.flatMap((d) => (d.certificate ? [presentCertificate(d.certificate)] : [])),
    charged: money(result.charged.amountMinor, result.charged.currency),
    deploymentId: result.deploymentId,
  };
}

export const deviceResolvers: Resolvers = {
  Query: {
    devices: async (_, args, ctx) => {
      const first = orDefault(args.first, 50);
      if (first < 1 || first > MAX_DEVICE_PAGE) {
        throw new DomainError('validation_failed', `first must be 1 to ${MAX_DEVICE_PAGE}.`, {
          errors: [{ field: 'first', message: `must be 1 to ${MAX_DEVICE_PAGE}` }],
        });
      }
      const page = await ctx.services.devices.list(ctx.actor, {
        filter: toServiceFilter(args.filter),
        limit: first,
        ...(args.after ? { cursor: args.after } : {}),
        ...(args.orderBy
          ? {
              sort: {
                field: SORT_FIELDS[args.orderBy.field],
                direction: args.orderBy.direction === 'DESC' ? 'desc' : 'asc',
              },
            }
          : {}),
      });
      return connection(page.devices, (_d, i) => page.cursors[i]!, page.nextCursor, {
        totalCount: page.total,
        quota: page.quota,
      });
    },
    device: (_, args, ctx) => orNull(ctx.services.devices.get(ctx.actor, { serial: args.serial })),
  },
  Mutation: {
    claimDevices: async (_, args, ctx) => {
      const { idempotencyKey, serials, model, firmware, site, ...json } = args.input;
      const { names, csrs } = ClaimJson.parse(json);
      const input = {
        serials,
        model,
        ...(firmware != null ? { firmware } : {}),
        ...(site != null ? { site } : {}),
        ...(names !== undefined ? { names } : {}),
        ...(csrs !== undefined ? { csrs } : {}),
      };
      if (idempotencyKey == null) return presentClaim(await ctx.services.claims.claim(ctx.actor, input));
      // Same semantics as REST's Idempotency-Key header (IdempotencyService.run), per account.
      const outcome = await ctx.services.idempotency.run(
        {
          actor: ctx.actor,
          key: idempotencyKey,
          operation: 'graphql.claimDevices',
          // The mutation addresses nothing beyond its input.
          target: {},
          body: input,
          requiredRole: 'admin',
        },
        async (unitOfWork) => ({
          status: 200,
          body: presentClaim(await ctx.services.claims.claim(ctx.actor, input, { unitOfWork })),
        }),
      );
      if (outcome.kind === 'ran') return outcome.response.body;
      // A replay is the JSON of what presentClaim answered for this key (operation and body
      // included in the key's check), and every field of it survives JSON.
      return outcome.body as ResolversParentTypes['ClaimDevicesPayload'];
    },
    updateDevice: (_, args, ctx) => {
      const { name, tags, config, site } = args.input;
      return ctx.services.devices.update(ctx.actor, {
        serial: args.serial,
        patch: {
          ...(name != null ? { name } : {}),
          ...(tags != null ? UpdateJson.parse({ tags }) : {}),
          ...(config != null ? { config: toConfigPatch(config) } : {}),
          // null unassigns; absent leaves the site as it is.
          ...(site !== undefined ? { site } : {}),
        },
      });
    },
    rotateDeviceCredentials: (_, args, ctx) =>
      ctx.services.devices.rotateCredentials(ctx.actor, { serial: args.serial }),
    startDeviceCredentialRotation: (_, args, ctx) =>
      ctx.services.rotations.startPasswordRotation(ctx.actor, {
        serial: args.serial,
        ...(args.graceS != null ? { graceS: args.graceS } : {}),
      }),
  },
  Device: {
    update: (device) => (device.update ? { ...device.update, serial: device.serial } : null),
    // The domain keeps these as maps (the REST document's shape); GraphQL lists them.
    refusedMessages: (device) =>
      Object.entries(device.refusedMessages).map(([reason, count]) => ({
        reason: oneOf(MESSAGE_REFUSAL_REASONS, reason, 'Message refusal reason'),
        count,
      })),
    refusedFields: (device) =>
      Object.entries(device.refusedFields).map(([field, s]) => ({
        ...s,
        field: oneOf(HEARTBEAT_FIELDS, field, 'Heartbeat field'),
      })),
    history: async (device, args, ctx) => {
      const limit = orDefault(args.first, 20);
      // First pages are batched across the devices of a list (DataLoader); later pages are per device.
      const page =
        !args.after && Number.isInteger(limit) && limit >= 1 && limit <= 100
          ? await ctx.loaders.historyHead.load(`${device.id}|${limit}`)
          : await ctx.services.devices.history(ctx.actor, {
              serial: device.serial,
              limit,
              ...(args.after ? { cursor: args.after } : {}),
            });
      return connection(page.events, (_e, i) => page.cursors[i]!, page.nextCursor, {});
    },
  },
  DeviceUpdate: {
    // A device's current update carries its state as the stored text.
    state: (u) => updateState(u),
    final: (u) => isFinal(updateState(u)),
  },
  DeviceConfig: {
    heartbeatIntervalS: (c) => c.heartbeat_interval_s ?? null,
    dimLevel: (c) => c.dim_level ?? null,
    powerOnLevel: (c) => c.power_on_level ?? null,
    timezone: (c) => c.timezone ?? null,
    maintenanceWindow: (c) => c.maintenance_window ?? null,
    luminaireIntervalS: (c) => c.luminaire_interval_s ?? null,
  },
  Subscription: {
    deviceChanged: liveField(
      (_, args, ctx) => ctx.live.deviceChanges(ctx.actor, args.filter),
      (change) => change,
    ),
  },
};
