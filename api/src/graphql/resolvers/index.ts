import type { IResolvers } from '@graphql-tools/utils';
import { accountResolvers } from './account.resolvers';
import { eventResolvers } from './events.resolvers';
import { webhookResolvers } from './webhooks.resolvers';
import { deviceResolvers } from './devices.resolvers';
import { fleetResolvers, presentSummary } from './fleet.resolvers';
import { deploymentResolvers } from './deployments.resolvers';
import { firmwareResolvers } from './firmware.resolvers';
import { certificateResolvers } from './certificates.resolvers';
import { DomainError } from '../../domain/shared/errors';
import type { LiveDevice, LiveReaders } from '../live/live-views';
import type { Services } from '../../services';

/** What the live views read again when something changed: the same service calls as the queries, presented alike. */
export function liveReaders(services: Services): LiveReaders {
  return {
    devices: async (actor, ids) => (await services.fleet.devicesByIds(actor, ids)) as unknown as LiveDevice[],
    fleetSummary: async (actor) => presentSummary(await services.fleet.summary(actor)),
    deployment: async (actor, id) => {
      try {
        return await services.deployments.get(actor, { id });
      } catch (error) {
        if (error instanceof DomainError && error.code === 'not_found') return null;
        throw error;
      }
    },
  };
}

/** Every area's resolvers. They are thin adapters: parse arguments, call ONE service method, present. */
export function createResolvers(): IResolvers[] {
  // The resolver maps are plain objects keyed by type name; graphql-tools merges them.
  return [
    accountResolvers,
    eventResolvers,
    webhookResolvers,
    deviceResolvers,
    fleetResolvers,
    deploymentResolvers,
    firmwareResolvers,
    certificateResolvers,
  ] as unknown as IResolvers[];
}
