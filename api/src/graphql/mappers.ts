import type { Actor } from '#core/shared/actor';
import type { DeviceUpdateSummary } from '#core/devices/device-types';
import type { DeviceUpdateView } from '#core/deployments/deployment-types';

/** Domain types resolvers hand on unchanged (codegen.ts maps the GraphQL types to them). */
export type { Device } from '#core/devices/device-types';
export type { DeviceConfig } from '#core/devices/device-config';
export type { Deployment, Rollout } from '#core/deployments/deployment-types';

/**
 * What resolvers hand on as the parent of a GraphQL type whose shape the domain does not have
 * (codegen.ts maps the types to these, so the generated resolver signatures are honest).
 */

/** `Viewer`: who is calling; `account`, `user` and `apiKey` are resolved from the context. */
export type ViewerParent = Pick<Actor, 'principal' | 'role'>;

/**
 * `DeviceUpdate` comes from two places: a device's current update (which does not repeat the
 * serial) and a deployment's per-device list (which does not repeat the deployment id).
 */
export type DeviceUpdateParent =
  (DeviceUpdateSummary & { serial: string }) | (DeviceUpdateView & { deploymentId: string });
