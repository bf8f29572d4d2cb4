import type { IResolvers } from '@graphql-tools/utils';
import type { LiveViews } from '../live/live-views';
import { accountResolvers } from './account.resolvers';
import { eventResolvers } from './events.resolvers';
import { webhookResolvers } from './webhooks.resolvers';

/**
 * Every area's resolvers. They are thin adapters: parse arguments, call ONE service method,
 * present. Live views get their re-read functions (the same service calls) here too.
 */
export function createResolvers(_live: LiveViews): IResolvers[] {
  return [accountResolvers, eventResolvers, webhookResolvers] as unknown as IResolvers[];
}
