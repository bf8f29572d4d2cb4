import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import { DEPLOYMENT_STATUSES, UPDATE_STATES } from '#core/deployments/deployment-types';
import { IdParams } from '../schemas/common';
import { DeploymentSchema, DeviceUpdateSchema } from '../schemas/firmware.schema';
import { presentDeployment, presentDeviceUpdate } from '../presenters/firmware.presenter';

const ListQuery = z.strictObject({
  status: z.enum(DEPLOYMENT_STATUSES).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: z.string().max(200).optional(),
});
const DevicesQuery = z.strictObject({
  state: z.enum([...UPDATE_STATES, 'superseded']).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  cursor: z.string().max(200).optional(),
});
const One = z.object({ deployment: DeploymentSchema });

type Action = 'cancel' | 'pause' | 'resume' | 'retry-failed' | 'rollback';
const ACTIONS: Array<{ action: Action; operationId: string; summary: string; created: boolean }> = [
  {
    action: 'cancel',
    operationId: 'cancelDeployment',
    summary: 'Cancel: queued updates are cancelled (devices stay where they are); sent ones finish',
    created: false,
  },
  {
    action: 'pause',
    operationId: 'pauseDeployment',
    summary: 'Pause: nothing more is sent; updates in flight finish',
    created: false,
  },
  {
    action: 'resume',
    operationId: 'resumeDeployment',
    summary: 'Resume a paused deployment (failures so far are acknowledged)',
    created: false,
  },
  {
    action: 'retry-failed',
    operationId: 'retryFailedDeployment',
    summary: 'New deployment of the same version to the devices that failed or timed out',
    created: true,
  },
  {
    action: 'rollback',
    operationId: 'rollbackDeployment',
    summary:
      'New deployment returning each device this one changed to its own previous version (422 firmware_file_missing when that binary is gone)',
    created: true,
  },
];

/** Deployments: list, detail with counts, per-device states, and the operator's actions. */
export function deploymentRoutes(services: Services): RouteDef[] {
  const run = (action: Action, actor: Parameters<Services['deployments']['get']>[0], id: string) => {
    switch (action) {
      case 'cancel':
        return services.deployments.cancel(actor, { id });
      case 'pause':
        return services.deployments.pause(actor, { id });
      case 'resume':
        return services.deployments.resume(actor, { id });
      case 'retry-failed':
        return services.deployments.retryFailed(actor, { id });
      case 'rollback':
        return services.deployments.rollback(actor, { id });
    }
  };
  return [
    defineRoute({
      method: 'get',
      path: '/firmware/deployments',
      operationId: 'listDeployments',
      summary: 'Deployments, newest first, with counts per device state',
      tag: 'Deployments',
      query: ListQuery,
      responses: {
        200: {
          description: 'A page',
          schema: z.object({ deployments: z.array(DeploymentSchema), next_cursor: z.string().nullable() }),
        },
      },
      handler: async ({ actor, query }) => {
        const page = await services.deployments.list(actor, query);
        return {
          status: 200,
          body: { deployments: page.deployments.map(presentDeployment), next_cursor: page.nextCursor },
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/firmware/deployments/:id',
      operationId: 'getDeployment',
      summary: 'A deployment: status, rollout, counts per device state',
      tag: 'Deployments',
      params: IdParams,
      responses: { 200: { description: 'The deployment', schema: One } },
      handler: async ({ actor, params }) => ({
        status: 200,
        body: { deployment: presentDeployment(await services.deployments.get(actor, params)) },
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/firmware/deployments/:id/devices',
      operationId: 'listDeploymentDevices',
      summary:
        'Per-device update states of a deployment, by serial, paged (state=superseded lists devices taken over by a newer deployment)',
      tag: 'Deployments',
      params: IdParams,
      query: DevicesQuery,
      responses: {
        200: {
          description: 'A page',
          schema: z.object({ devices: z.array(DeviceUpdateSchema), next_cursor: z.string().nullable() }),
        },
      },
      handler: async ({ actor, params, query }) => {
        const page = await services.deployments.devices(actor, { id: params.id, ...query });
        return { status: 200, body: { devices: page.devices.map(presentDeviceUpdate), next_cursor: page.nextCursor } };
      },
    }),
    ...ACTIONS.map(({ action, operationId, summary, created }) =>
      defineRoute({
        method: 'post',
        path: `/firmware/deployments/:id/${action}`,
        operationId,
        summary,
        tag: 'Deployments',
        params: IdParams,
        responses: created
          ? { 201: { description: 'The new deployment', schema: One } }
          : { 200: { description: 'The deployment', schema: One } },
        handler: async ({ actor, params }) => ({
          status: created ? 201 : 200,
          body: { deployment: presentDeployment(await run(action, actor, params.id)) },
        }),
      }),
    ),
  ];
}
