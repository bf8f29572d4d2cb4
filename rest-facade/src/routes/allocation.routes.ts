import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import { AllocationSchema } from '../schemas/allocation.schemas';
import { presentAllocation } from '../presenters/allocation.presenter';

export function allocationRoutes(services: Services): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/allocation',
      operationId: 'getAllocation',
      summary: 'Quota, provisioned devices, budget and spend, unit price, and which thresholds were reached',
      tag: 'Allocation',
      responses: { 200: { description: 'Current allocation and budget', schema: AllocationSchema } },
      handler: async ({ actor }) => ({ status: 200, body: presentAllocation(await services.allocation.get(actor)) }),
    }),
  ];
}
