import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import { DomainError } from '#core/shared/errors';
import { ClaimDevicesInput } from '#core/devices/claim.service';
import { UpdateDeviceInput } from '#core/devices/device.service';
import type { DeviceSortField } from '#core/devices/device.service';
import {
  SerialParams,
  ListDevicesQuery,
  HistoryQuery,
  DeviceSchema,
  DeviceListSchema,
  CredentialsSchema,
  CredentialRotationSchema,
  RotateCredentialsBody,
  ClaimResponseSchema,
  HistorySchema,
} from '../schemas/devices.schemas';
import { presentSummary } from '../presenters/luminaire.presenter';
import { presentDeviceHealth } from '../presenters/health.presenter';
import { presentDevice, presentClaim, presentHistory, presentRotation } from '../presenters/devices.presenter';
import { streamDeviceList, sendDevicePage } from '../presenters/device-stream';

const filterOf = (q: ListDevicesQuery) => ({
  model: q.model,
  status: q.status,
  firmware: q.firmware,
  firmwareLt: q.firmware_lt,
  q: q.q,
  site: q.site,
});

/** Devices: list (paged or streamed), claim, read, configure, history, credentials, unclaim. */
export function deviceRoutes(services: Services): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/devices',
      operationId: 'listDevices',
      summary:
        'List devices. With `limit`: one page in the `sort` order (default serial) and `next_cursor`. Without: every matching device in serial order, streamed as one JSON document.',
      tag: 'Devices',
      query: ListDevicesQuery,
      responses: { 200: { description: 'Devices, the count of all matches and the quota', schema: DeviceListSchema } },
      handler: async ({ actor, query: q, res }) => {
        if (q.limit !== undefined) {
          const sort =
            q.sort === undefined
              ? {}
              : {
                  sort: {
                    field: q.sort.replace(/^-/, '') as DeviceSortField,
                    direction: q.sort.startsWith('-') ? ('desc' as const) : ('asc' as const),
                  },
                };
          sendDevicePage(
            res,
            await services.devices.listJson(actor, {
              filter: filterOf(q),
              limit: q.limit,
              ...(q.cursor !== undefined ? { cursor: q.cursor } : {}),
              ...sort,
            }),
          );
          return;
        }
        if (q.cursor !== undefined) {
          throw new DomainError('validation_failed', 'A cursor needs a limit.', {
            errors: [{ field: 'query.cursor', message: 'only together with limit' }],
          });
        }
        if (q.sort !== undefined && q.sort !== 'serial') {
          throw new DomainError('validation_failed', 'The full list streams in serial order; sorting needs a limit.', {
            errors: [{ field: 'query.sort', message: 'only together with limit' }],
          });
        }
        await streamDeviceList(res, await services.devices.listAllJson(actor, { filter: filterOf(q) }));
      },
    }),
    defineRoute({
      method: 'post',
      path: '/devices/claim',
      operationId: 'claimDevices',
      summary:
        'Claim devices, all or nothing: batch `{serials, model, firmware?, names?, csrs?, site?}` (at most 1000) or single `{serial, model, firmware?, name?, site?}`. ' +
        'Returns each device with its MQTT credentials (shown once) and, for each serial in `csrs` (PEM certificate requests), its signed certificate; schedules `firmware` for installation.',
      tag: 'Devices',
      body: ClaimDevicesInput,
      idempotent: { requiredRole: 'admin' },
      responses: { 201: { description: 'Claimed', schema: ClaimResponseSchema } },
      handler: async ({ actor, body, unitOfWork }) => ({
        status: 201,
        body: presentClaim(await services.claims.claim(actor, body, unitOfWork ? { unitOfWork } : {})),
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/devices/:serial',
      operationId: 'getDevice',
      summary:
        'One device of the account (404 for unknown serials and other accounts alike), with its `luminaire` summary (latest values, burn hours, lifetime energy)',
      tag: 'Devices',
      params: SerialParams,
      responses: { 200: { description: 'The device', schema: DeviceSchema } },
      handler: async ({ actor, params }) => {
        const { device, luminaire } = await services.luminaire.deviceRecord(actor, { serial: params.serial });
        const health = await services.health.deviceHealth(actor, { serial: params.serial });
        return {
          status: 200,
          body: { ...presentDevice(device), luminaire: presentSummary(luminaire), health: presentDeviceHealth(health) },
        };
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/devices/:serial',
      operationId: 'updateDevice',
      summary:
        'Rename, tag and configure a device (merge: omitted fields stay; a null tag value removes the tag; maintenance_window null removes the window). ' +
        'A configuration change is pushed to the device with a new version.',
      tag: 'Devices',
      params: SerialParams,
      body: UpdateDeviceInput,
      responses: { 200: { description: 'The device after the change', schema: DeviceSchema } },
      handler: async ({ actor, params, body }) => ({
        status: 200,
        body: presentDevice(await services.devices.update(actor, { serial: params.serial, patch: body })),
      }),
    }),
    defineRoute({
      method: 'delete',
      path: '/devices/:serial',
      operationId: 'unclaimDevice',
      summary:
        'Unclaim a device: it, its credentials and history are removed and it is disconnected. Frees a quota slot; credits nothing.',
      tag: 'Devices',
      params: SerialParams,
      responses: { 204: { description: 'Unclaimed' } },
      handler: async ({ actor, params }) => {
        await services.devices.unclaim(actor, { serial: params.serial });
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/devices/:serial/history',
      operationId: 'getDeviceHistory',
      summary: 'Status, firmware, configuration, claim and update events of a device, newest first',
      tag: 'Devices',
      params: SerialParams,
      query: HistoryQuery,
      responses: { 200: { description: 'A page of events', schema: HistorySchema } },
      handler: async ({ actor, params, query: q }) => {
        const page = await services.devices.history(actor, {
          serial: params.serial,
          ...(q.limit !== undefined ? { limit: q.limit } : {}),
          ...(q.cursor !== undefined ? { cursor: q.cursor } : {}),
        });
        return { status: 200, body: presentHistory(page) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/devices/:serial/credentials',
      operationId: 'rotateDeviceCredentials',
      summary:
        'New MQTT password for the device. Emergency (default, no body needed): shown once, the old one refused at once and the device disconnected. ' +
        '`{"mode": "in_band"}`: delivered to the device over its session, never shown; the old one works until the device confirms or `grace_s` passes',
      tag: 'Devices',
      params: SerialParams,
      body: RotateCredentialsBody,
      bodyOptional: true,
      responses: {
        201: { description: 'Emergency: the new credentials (shown once)', schema: CredentialsSchema },
        202: { description: 'In band: the rotation is pending', schema: CredentialRotationSchema },
      },
      handler: async ({ actor, params, body }) => {
        if (body.mode === 'emergency')
          return { status: 201, body: await services.devices.rotateCredentials(actor, { serial: params.serial }) };
        const rotation = await services.rotations.startPasswordRotation(actor, {
          serial: params.serial,
          ...(body.grace_s !== undefined ? { graceS: body.grace_s } : {}),
        });
        return { status: 202, body: presentRotation(rotation) };
      },
    }),
  ];
}
