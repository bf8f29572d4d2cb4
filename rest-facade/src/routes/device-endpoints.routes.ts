import { defineRoute, type RouteDef } from '../route';
import { DeviceEndpointsSchema, type DeviceEndpoints } from '../schemas/device-endpoints.schemas';

/** Where devices reach the broker, given by the composition root once the listeners are bound. */
export type DeviceEndpointsSource = () => DeviceEndpoints;

/** Discovery: the device-facing broker URLs (the simulator's `--api-url` without `--broker-url` reads them). */
export function deviceEndpointRoutes(endpoints: DeviceEndpointsSource): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/device-endpoints',
      operationId: 'getDeviceEndpoints',
      summary:
        "The broker URLs devices connect to: PUBLIC_URL's host (or the bound address) with the ports the service is bound to now, " +
        'including a port `npm start` moved MQTT to because 1883 was taken',
      tag: 'Devices',
      responses: { 200: { description: 'The device-facing URLs', schema: DeviceEndpointsSchema } },
      handler: () => Promise.resolve({ status: 200, body: endpoints() }),
    }),
  ];
}
