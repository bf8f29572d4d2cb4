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

/** Every REST v1 route; the router and the OpenAPI document are both built from this list. */
export function allRoutes(services: Services): RouteDef[] {
  return [
    ...sessionRoutes(services),
    ...apiKeyRoutes(services),
    ...modelRoutes(services),
    ...deviceRoutes(services),
    ...certificateRoutes(services),
    ...allocationRoutes(services),
    ...webhookRoutes(services),
    ...firmwareRoutes(services),
    ...deploymentRoutes(services),
  ];
}
