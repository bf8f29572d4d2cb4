import type { IResolvers } from '@graphql-tools/utils';
import type { LiveViews } from '../live/live-views';
import { accountResolvers } from './account.resolvers';
import { eventResolvers } from './events.resolvers';
import { webhookResolvers } from './webhooks.resolvers';
import { deviceResolvers } from './devices.resolvers';
import { fleetResolvers, presentSummary } from './fleet.resolvers';
import type { LiveDevice } from '../live/live-views';
import type { Services } from '../../services';

/**
 * Every area's resolvers. They are thin adapters: parse arguments, call ONE service method,
 * present. Live views get their re-read functions (the same service calls) here too.
 */
export function createResolvers(live: LiveViews, services: Services): IResolvers[] {
  live.readers.devices = async (actor, ids) => (await services.fleet.devicesByIds(actor, ids)) as unknown as LiveDevice[];
  live.readers.fleetSummary = async (actor) => presentSummary(await services.fleet.summary(actor));
  // The resolver maps are plain objects keyed by type name; graphql-tools merges them.
  return [accountResolvers, eventResolvers, webhookResolvers, deviceResolvers, fleetResolvers] as unknown as IResolvers[];
}
