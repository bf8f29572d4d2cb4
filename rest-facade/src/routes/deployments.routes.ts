import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import type { DeployInput } from '#core/deployments/deployment.service';
import { DomainError } from '#core/shared/errors';
import { IdParams } from '../schemas/common';
import {
  DeployAcceptedSchema,
  DeployBody,
  DeployDryRunSchema,
  DeploymentDevicesQuery,
  DeploymentSchema,
  DeviceUpdateSchema,
  ListDeploymentsQuery,
} from '../schemas/deployments.schemas';
import {
  presentDeployAccepted,
  presentDeployPreview,
  presentDeployment,
  presentDeviceUpdate,
} from '../presenters/deployments.presenter';

const One = z.object({ deployment: DeploymentSchema });

/** The REST deploy body (snake_case, parsed) as the domain's DeployInput (camelCase). */
export function toDeployInput(body: DeployBody): DeployInput {
  const { filter, rollout } = body;
  return {
    firmwareVersion: body.firmware_version,
    filter: {
      ...(filter.model !== undefined ? { model: filter.model } : {}),
      ...(filter.firmware_lt !== undefined ? { firmwareLt: filter.firmware_lt } : {}),
      ...(filter.status !== undefined ? { status: filter.status } : {}),
      ...(filter.serials !== undefined ? { serials: filter.serials } : {}),
      ...(filter.site !== undefined ? { site: filter.site } : {}),
    },
    ...(body.serials !== undefined ? { serials: body.serials } : {}),
    ...(rollout
      ? {
          rollout: {
            batches: rollout.batches,
            ...(rollout.failure_threshold_percent !== undefined
              ? { failureThresholdPercent: rollout.failure_threshold_percent }
              : {}),
            minBatchSuccessPercent: rollout.min_batch_success_percent,
            ...(rollout.max_concurrent_per_tag !== undefined
              ? { maxConcurrentPerTag: rollout.max_concurrent_per_tag }
              : {}),
            healthWindowMinutes: rollout.health_window_minutes,
            healthMaxReconnects: rollout.health_max_reconnects,
            fixtureSignals: rollout.fixture_signals,
            fixtureMaxRatio: rollout.fixture_max_ratio,
            fixtureMinDeviceDays: rollout.fixture_min_device_days,
            fixtureMinEvents: rollout.fixture_min_events,
            fixtureConfidence: rollout.fixture_confidence,
            fixtureBaselineDays: rollout.fixture_baseline_days,
          },
        }
      : {}),
    respectMaintenanceWindow: body.respect_maintenance_window,
    ...(body.scheduled_at !== undefined ? { scheduledAt: body.scheduled_at } : {}),
  };
}

/**
 * The domain names the fields of its DeployInput (`filter.firmwareLt`); a REST answer names
 * those of the body (`filter.firmware_lt`). Each is the other's snake_case, segment by segment.
 */
async function withBodyFieldNames<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (!(err instanceof DomainError) || !err.errors) throw err;
    throw new DomainError(err.code, err.message, {
      errors: err.errors.map((e) => ({ ...e, field: e.field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`) })),
      ...(err.details !== undefined ? { details: err.details } : {}),
      ...(err.retryAfterSeconds !== undefined ? { retryAfterSeconds: err.retryAfterSeconds } : {}),
    });
  }
}

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

/** Deployments (docs/ota.md): deploy, list, detail with counts, per-device states, and the operator's actions. */
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
      method: 'post',
      path: '/firmware/deploy',
      operationId: 'deployFirmware',
      summary:
        'Schedule an OTA update for every matching device (filter or explicit serials); "dry_run": true only counts',
      tag: 'Firmware',
      body: DeployBody,
      responses: {
        202: { description: 'Recorded; devices are updated as they become reachable', schema: DeployAcceptedSchema },
        200: { description: 'Dry run: what would be targeted now (nothing is created)', schema: DeployDryRunSchema },
      },
      handler: async ({ actor, body }) => {
        const input = toDeployInput(body);
        if (body.dry_run) {
          const preview = await withBodyFieldNames(() => services.deployments.preview(actor, input));
          return { status: 200, body: presentDeployPreview(preview) };
        }
        const deployment = await withBodyFieldNames(() => services.deployments.deploy(actor, input));
        const statusUrl = `/api/v1/firmware/deployments/${deployment.id}`;
        return { status: 202, headers: { Location: statusUrl }, body: presentDeployAccepted(deployment, statusUrl) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/firmware/deployments',
      operationId: 'listDeployments',
      summary: 'Deployments, newest first, with counts per device state',
      tag: 'Deployments',
      query: ListDeploymentsQuery,
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
      query: DeploymentDevicesQuery,
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
