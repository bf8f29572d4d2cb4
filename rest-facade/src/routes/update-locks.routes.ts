import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import { SerialParams } from '../schemas/devices.schemas';
import {
  DeviceUpdateLockSchema,
  ModelEmergencySchema,
  ModelNameParams,
  SetDeviceEmergencyBody,
  SetModelEmergencyBody,
} from '../schemas/update-locks.schemas';
import { presentDeviceLock } from '../presenters/update-locks.presenter';

/** A device's update lock (set by the device over MQTT) and the emergency-lighting flags. */
export function updateLockRoutes(services: Services): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/devices/:serial/update-lock',
      operationId: 'getDeviceUpdateLock',
      summary:
        "The device's update lock in force (reason, until), its last emergency duration test, and its emergency-lighting flags",
      tag: 'Devices',
      params: SerialParams,
      responses: { 200: { description: 'The lock', schema: DeviceUpdateLockSchema } },
      handler: async ({ actor, params }) => ({
        status: 200,
        body: presentDeviceLock(await services.updateLocks.get(actor, { serial: params.serial })),
      }),
    }),
    defineRoute({
      method: 'put',
      path: '/devices/:serial/emergency-lighting',
      operationId: 'setDeviceEmergencyLighting',
      summary:
        "Mark a device as emergency lighting or not (EN 62034: held 24 h after a duration test); null: its model's flag applies",
      tag: 'Devices',
      params: SerialParams,
      body: SetDeviceEmergencyBody,
      responses: { 200: { description: 'The lock and flags after the change', schema: DeviceUpdateLockSchema } },
      handler: async ({ actor, params, body }) => ({
        status: 200,
        body: presentDeviceLock(
          await services.updateLocks.setDeviceEmergency(actor, {
            serial: params.serial,
            emergencyLighting: body.emergency_lighting,
          }),
        ),
      }),
    }),
    defineRoute({
      method: 'put',
      path: '/models/:name/emergency-lighting',
      operationId: 'setModelEmergencyLighting',
      summary: "Mark a model's fixtures as emergency lighting (a device's own flag overrides it)",
      tag: 'Models',
      params: ModelNameParams,
      body: SetModelEmergencyBody,
      responses: { 200: { description: 'The flag', schema: ModelEmergencySchema } },
      handler: async ({ actor, params, body }) => {
        const r = await services.updateLocks.setModelEmergency(actor, {
          name: params.name,
          emergencyLighting: body.emergency_lighting,
        });
        return { status: 200, body: { model: r.model, emergency_lighting: r.emergencyLighting } };
      },
    }),
  ];
}
