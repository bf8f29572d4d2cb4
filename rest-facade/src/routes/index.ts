import type { RouteDef } from '../route';
import type { Services } from '#core/services';
import { apiKeyRoutes } from './api-keys.routes';
import { sessionRoutes } from './session.routes';
import { webhookRoutes } from './webhooks.routes';
import { deviceRoutes } from './devices.routes';
import { modelRoutes } from './models.routes';
import { allocationRoutes } from './allocation.routes';
import { firmwareRoutes } from './firmware.routes';
import { deploymentRoutes } from './deployments.routes';
import { certificateRoutes } from './certificates.routes';
import { siteRoutes } from './sites.routes';
import { updateLockRoutes } from './update-locks.routes';
import { deviceEndpointRoutes, type DeviceEndpointsSource } from './device-endpoints.routes';
import { luminaireRoutes } from './luminaire.routes';
import { healthRoutes } from './health.routes';

/** Before the service is bound (route listings in tests): no broker URL is known yet. */
const notBound: DeviceEndpointsSource = () => ({ mqtt_url: null, mqtts_url: null, websocket_url: '' });

/** Every REST v1 route; the router and the OpenAPI document are both built from this list. */
export function allRoutes(services: Services, deviceEndpoints: DeviceEndpointsSource = notBound): RouteDef[] {
  return [
    ...sessionRoutes(services),
    ...apiKeyRoutes(services),
    ...modelRoutes(services),
    ...deviceRoutes(services),
    ...certificateRoutes(services),
    ...deviceEndpointRoutes(deviceEndpoints),
    ...allocationRoutes(services),
    ...webhookRoutes(services),
    ...firmwareRoutes(services),
    ...deploymentRoutes(services),
    ...luminaireRoutes(services),
    ...healthRoutes(services),
    ...siteRoutes(services),
    ...updateLockRoutes(services),
  ];
}
