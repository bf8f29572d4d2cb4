import type { Services } from '#core/services';
import type { Resolvers } from '../generated/resolvers-types';
import type { LiveReaders } from '../live/live-views';
import { DateTimeScalar, JSONScalar } from '../scalars';
import { accountResolvers } from './accounts.resolvers';
import { eventResolvers } from './events.resolvers';
import { webhookResolvers } from './webhooks.resolvers';
import { deviceResolvers } from './devices.resolvers';
import { fleetResolvers, presentSummary } from './fleet.resolvers';
import { deploymentResolvers } from './deployments.resolvers';
import { firmwareResolvers } from './firmware.resolvers';
import { certificateResolvers } from './certificates.resolvers';
import { luminaireResolvers } from './luminaire.resolvers';
import { healthResolvers } from './health.resolvers';
import { siteResolvers } from './sites.resolvers';
import { updateLockResolvers } from './update-locks.resolvers';
import { deltaResolvers } from './deltas.resolvers';
import { orNull } from './presenters';

/** What the live views read again when something changed: the same service calls as the queries, presented alike. */
export function liveReaders(services: Services): LiveReaders {
  return {
    devices: (actor, ids) => services.fleet.devicesByIds(actor, ids),
    fleetSummary: async (actor) => presentSummary(await services.fleet.summary(actor)),
    deployment: (actor, id) => orNull(services.deployments.get(actor, { id })),
  };
}

/**
 * Every area's resolvers, typed by the schema (generated/resolvers-types.ts). They are thin
 * adapters: parse arguments, call ONE service method, present. graphql-tools merges the maps.
 */
export function createResolvers(): Resolvers[] {
  return [
    { DateTime: DateTimeScalar, JSON: JSONScalar },
    accountResolvers,
    eventResolvers,
    webhookResolvers,
    deviceResolvers,
    fleetResolvers,
    deploymentResolvers,
    firmwareResolvers,
    certificateResolvers,
    siteResolvers,
    updateLockResolvers,
    deltaResolvers,
    luminaireResolvers,
    healthResolvers,
  ];
}
