import { z } from 'zod';
import { DomainError } from '../shared/errors';
import { DEVICE_STATUSES } from '../devices/device-types';
import { DEPLOYMENT_STATUSES, RolloutInput, UPDATE_STATES } from './deployment-types';
import type { DeltaCache } from '../firmware/delta/delta-cache';
import type { ServiceDeps } from '../service-deps';
import type { ModelService } from '../models/model.service';

export const MAX_DEPLOY_SERIALS = 10_000;
/** Explicit targets of a deploy request (each is checked as a serial when it is resolved). */
export const DeploySerials = z.array(z.string().min(1).max(64)).min(1).max(MAX_DEPLOY_SERIALS);

/**
 * A deploy request (docs/ota.md "Deploy"), camelCase like every input of the domain: the REST
 * route and the GraphQL resolvers translate their own input into it. `filter.serials` or
 * top-level `serials` (not both) name explicit targets; a single device is one serial.
 * `filter.model` may be left out when the version exists for exactly one model of the account.
 * Field errors name these fields (`filter.firmwareLt`, `serials.3`).
 */
export const DeployInput = z
  .strictObject({
    firmwareVersion: z.string().min(1).max(64),
    filter: z
      .strictObject({
        model: z.string().min(1).max(64).optional(),
        firmwareLt: z.string().min(1).max(64).optional(),
        status: z.enum(DEVICE_STATUSES).optional(),
        serials: DeploySerials.optional(),
        /** Only devices of this site (id, or name ignoring case). */
        site: z.string().trim().min(1).max(100).optional(),
      })
      .default({}),
    serials: DeploySerials.optional(),
    rollout: RolloutInput.optional(),
    respectMaintenanceWindow: z.boolean().default(true),
    scheduledAt: z.iso.datetime({ offset: true }).optional(),
  })
  .refine((i) => !(i.serials && i.filter.serials), {
    path: ['serials'],
    message: 'give serials either at the top level or in filter, not both',
  });
export type DeployInput = z.input<typeof DeployInput>;

export const ListDeploymentsInput = z.strictObject({
  status: z.enum(DEPLOYMENT_STATUSES).optional(),
  limit: z.number().int().min(1).max(100).default(20),
  cursor: z.string().max(200).optional(),
});
export type ListDeploymentsInput = z.input<typeof ListDeploymentsInput>;

export const ListDeploymentDevicesInput = z.strictObject({
  state: z.enum([...UPDATE_STATES, 'superseded', 'no_upgrade_path'] as [string, ...string[]]).optional(),
  limit: z.number().int().min(1).max(1000).default(100),
  cursor: z.string().max(200).optional(),
});
export type ListDeploymentDevicesInput = z.input<typeof ListDeploymentDevicesInput>;

/** Told after a commit that changed what the engine should deliver (it then dispatches). */
export interface DeploymentChangeListener {
  deploymentChanged(deploymentId: string): void;
}

/** What the deployment operations work with (DeploymentService hands it to each). */
export interface DeploymentArea {
  deps: ServiceDeps;
  models: Pick<ModelService, 'requireByName'>;
  engine: DeploymentChangeListener;
  /** Delta images: the dry run's `deltas` (firmware/delta/delta-cache.ts). Absent: the dry run lists none. */
  deltas?: Pick<DeltaCache, 'preview'>;
}

export { stringKeysCursor as cursorCodec } from '../shared/cursor';

export function versionNotFound(version: string, where: string): DomainError {
  return new DomainError('version_not_found', `Firmware ${version} is not a version of ${where}.`, {
    errors: [{ field: 'firmwareVersion', message: 'is not an uploaded version' }],
  });
}

export function fileMissing(versions: string[]): DomainError {
  return new DomainError(
    'firmware_file_missing',
    `The binary of firmware ${versions.join(', ')} was deleted; upload it again first.`,
    { details: { versions } },
  );
}
