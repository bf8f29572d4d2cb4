import type { GraphQLContext } from '../context';
import { DomainError } from '../../domain/shared/errors';
import type { Device } from '../../domain/devices/device-types';
import type { DeviceConfig } from '../../domain/devices/device-config';
import { historyCursor } from '../../domain/devices/device-history';
import type { ClaimResult } from '../../domain/devices/claim.service';
import type { DeviceSortField } from '../../domain/devices/device.service';
import { MAX_DEVICE_PAGE } from '../limits';
import { connection, money } from './presenters';
import { presentCertificate } from './certificates.resolvers';

interface DeviceFilterArgs {
  model?: string | null;
  status?: 'online' | 'offline' | 'updating' | null;
  firmware?: string | null;
  text?: string | null;
}

interface ConfigInput {
  heartbeatIntervalS?: number | null;
  dimLevel?: number | null;
  powerOnLevel?: number | null;
  timezone?: string | null;
  maintenanceWindow?: { start: string; end: string } | null;
}

/** GraphQL's filter to the service's (which also knows firmwareLt; `text` is its `q`). */
export function toServiceFilter(filter: DeviceFilterArgs | null | undefined) {
  const f = filter ?? {};
  return {
    ...(f.model != null ? { model: f.model } : {}),
    ...(f.status != null ? { status: f.status } : {}),
    ...(f.firmware != null ? { firmware: f.firmware } : {}),
    ...(f.text != null && f.text !== '' ? { q: f.text } : {}),
  };
}

/** camelCase input to the snake_case configuration keys the domain and the device protocol use. */
function toConfigPatch(input: ConfigInput): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  if (input.heartbeatIntervalS != null) patch.heartbeat_interval_s = input.heartbeatIntervalS;
  if (input.dimLevel != null) patch.dim_level = input.dimLevel;
  if (input.powerOnLevel != null) patch.power_on_level = input.powerOnLevel;
  if (input.timezone != null) patch.timezone = input.timezone;
  // null removes the window (the only key that may be removed).
  if (input.maintenanceWindow !== undefined) patch.maintenance_window = input.maintenanceWindow;
  return patch;
}

export function presentClaim(result: ClaimResult) {
  return {
    count: result.claimed,
    devices: result.devices.map((d) => d.device),
    credentials: result.devices.map((d) => d.credentials),
    certificates: result.devices.flatMap((d) => (d.certificate ? [presentCertificate(d.certificate)] : [])),
    charged: money(result.charged.amountMinor, result.charged.currency),
    deploymentId: result.deploymentId,
  };
}

/** Lookups answer null for serials that are not the caller's (exactly like unknown ones). */
async function orNull<T>(work: Promise<T>): Promise<T | null> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof DomainError && error.code === 'not_found') return null;
    throw error;
  }
}

export const deviceResolvers = {
  Query: {
    devices: async (
      _: unknown,
      args: {
        first?: number | null;
        after?: string | null;
        filter?: DeviceFilterArgs | null;
        orderBy?: { field: string; direction?: 'ASC' | 'DESC' | null } | null;
      },
      ctx: GraphQLContext,
    ) => {
      const first = args.first ?? 50;
      if (first < 1 || first > MAX_DEVICE_PAGE) {
        throw new DomainError('validation_failed', `first must be 1 to ${MAX_DEVICE_PAGE}.`, {
          errors: [{ field: 'first', message: `must be 1 to ${MAX_DEVICE_PAGE}` }],
        });
      }
      const page = await ctx.services.devices.list(ctx.actor, {
        filter: toServiceFilter(args.filter),
        limit: first,
        ...(args.after ? { cursor: args.after } : {}),
        // DeviceOrderField values are the service's field names in upper case (LAST_SEEN -> last_seen).
        ...(args.orderBy
          ? {
              sort: {
                field: args.orderBy.field.toLowerCase() as DeviceSortField,
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
    device: (_: unknown, args: { serial: string }, ctx: GraphQLContext) =>
      orNull(ctx.services.devices.get(ctx.actor, { serial: args.serial })),
  },
  Mutation: {
    claimDevices: async (
      _: unknown,
      args: {
        input: {
          serials: string[];
          model: string;
          firmware?: string | null;
          names?: Record<string, string> | null;
          csrs?: Record<string, string> | null;
          idempotencyKey?: string | null;
        };
      },
      ctx: GraphQLContext,
    ) => {
      const { idempotencyKey, ...rest } = args.input;
      const input = {
        serials: rest.serials,
        model: rest.model,
        ...(rest.firmware != null ? { firmware: rest.firmware } : {}),
        ...(rest.names != null ? { names: rest.names } : {}),
        ...(rest.csrs != null ? { csrs: rest.csrs } : {}),
      };
      if (idempotencyKey == null) return presentClaim(await ctx.services.claims.claim(ctx.actor, input));
      // Same semantics as REST's Idempotency-Key header (IdempotencyService.run), per account.
      const outcome = await ctx.services.idempotency.run(
        {
          actor: ctx.actor,
          key: idempotencyKey,
          operation: 'graphql.claimDevices',
          body: input,
          requiredRole: 'admin',
        },
        async (unitOfWork) => ({
          status: 200,
          body: presentClaim(await ctx.services.claims.claim(ctx.actor, input, { unitOfWork })),
        }),
      );
      return outcome.kind === 'replayed' ? outcome.body : outcome.response.body;
    },
    updateDevice: (
      _: unknown,
      args: {
        serial: string;
        input: { name?: string | null; tags?: Record<string, string | null> | null; config?: ConfigInput | null };
      },
      ctx: GraphQLContext,
    ) =>
      ctx.services.devices.update(ctx.actor, {
        serial: args.serial,
        patch: {
          ...(args.input.name != null ? { name: args.input.name } : {}),
          ...(args.input.tags != null ? { tags: args.input.tags } : {}),
          ...(args.input.config != null ? { config: toConfigPatch(args.input.config) } : {}),
        },
      }),
    rotateDeviceCredentials: (_: unknown, args: { serial: string }, ctx: GraphQLContext) =>
      ctx.services.devices.rotateCredentials(ctx.actor, { serial: args.serial }),
  },
  Device: {
    update: (device: Device) => (device.update ? { ...device.update, serial: device.serial } : null),
    history: async (device: Device, args: { first?: number | null; after?: string | null }, ctx: GraphQLContext) => {
      const limit = args.first ?? 20;
      // First pages are batched across the devices of a list (DataLoader); later pages are per device.
      const page =
        !args.after && Number.isInteger(limit) && limit >= 1 && limit <= 100
          ? await ctx.loaders.historyHead.load(`${device.id}|${limit}`)
          : await ctx.services.devices.history(ctx.actor, {
              serial: device.serial,
              limit,
              ...(args.after ? { cursor: args.after } : {}),
            });
      return connection(page.events, (e) => historyCursor.encode(e.id), page.nextCursor);
    },
  },
  DeviceConfig: {
    heartbeatIntervalS: (c: DeviceConfig) => c.heartbeat_interval_s ?? null,
    dimLevel: (c: DeviceConfig) => c.dim_level ?? null,
    powerOnLevel: (c: DeviceConfig) => c.power_on_level ?? null,
    timezone: (c: DeviceConfig) => c.timezone ?? null,
    maintenanceWindow: (c: DeviceConfig) => c.maintenance_window ?? null,
  },
  Subscription: {
    deviceChanged: {
      subscribe: (_: unknown, args: { filter?: DeviceFilterArgs | null }, ctx: GraphQLContext) =>
        ctx.live.deviceChanges(ctx.actor, args.filter),
      resolve: (change: unknown) => change,
    },
  },
};
