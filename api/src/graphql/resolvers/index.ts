import type { IResolvers } from '@graphql-tools/utils';
import type { LiveViews } from '../live/live-views';
import { accountResolvers } from './account.resolvers';
import { eventResolvers } from './events.resolvers';
import { webhookResolvers } from './webhooks.resolvers';
import { deviceResolvers } from './devices.resolvers';
import { fleetResolvers, presentSummary } from './fleet.resolvers';
import { deploymentResolvers } from './deployments.resolvers';
import { firmwareResolvers } from './firmware.resolvers';
import { certificateResolvers } from './certificates.resolvers';
import { DomainError } from '../../domain/shared/errors';
import type { LiveDevice } from '../live/live-views';
import type { Services } from '../../services';

/**
 * Every area's resolvers. They are thin adapters: parse arguments, call ONE service method,
 * present. Live views get their re-read functions (the same service calls) here too.
 */
export function createResolvers(live: LiveViews, services: Services): IResolvers[] {
  live.readers.devices = async (actor, ids) => (await services.fleet.devicesByIds(actor, ids)) as unknown as LiveDevice[];
  live.readers.fleetSummary = async (actor) => presentSummary(await services.fleet.summary(actor));
  live.readers.deployment = async (actor, id) => {
    try {
      return await services.deployments.get(actor, { id });
    } catch (error) {
      if (error instanceof DomainError && error.code === 'not_found') return null;
      throw error;
    }
  };
  // The resolver maps are plain objects keyed by type name; graphql-tools merges them.
  return [accountResolvers, eventResolvers, webhookResolvers, deviceResolvers, fleetResolvers, deploymentResolvers, firmwareResolvers, certificateResolvers] as unknown as IResolvers[];
}
