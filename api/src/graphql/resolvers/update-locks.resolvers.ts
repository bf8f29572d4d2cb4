import type { Resolvers } from '../generated/resolvers-types';
import { noneHeld } from '#core/deployments/held-updates';
import type { DeviceUpdateParent } from '../mappers';

/** A deployment's list carries `held`; a device's current update does not (it is never shown held there). */
const heldOf = (u: DeviceUpdateParent) => ('held' in u ? (u.held ?? null) : null);

/** Held updates (docs/ota.md "Update locks"): what the deployment and its updates show of them. */
export const updateLockResolvers: Resolvers = {
  Deployment: {
    held: (d) => d.held ?? noneHeld(),
  },
  DeviceUpdate: {
    heldReason: (u) => heldOf(u)?.reason ?? null,
    heldUntil: (u) => heldOf(u)?.until ?? null,
  },
};
