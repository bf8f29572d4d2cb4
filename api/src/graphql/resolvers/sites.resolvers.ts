import type { CreateSiteInput, UpdateSiteInput } from '#core/sites/site-types';
import type {
  CreateSiteInput as GqlCreateSiteInput,
  Resolvers,
  SiteFreezeInput,
  UpdateSiteInput as GqlUpdateSiteInput,
} from '../generated/resolvers-types';
import { connection, orNull, withoutNulls } from './presenters';

const toFreezes = (freezes: SiteFreezeInput[] | null | undefined) =>
  freezes == null ? {} : { freezes: freezes.map((f) => withoutNulls(f)) };

function toCreate(input: GqlCreateSiteInput): CreateSiteInput {
  const { freezes, ...rest } = input;
  return { ...withoutNulls(rest), ...toFreezes(freezes) };
}

/** GraphQL's update input: a null clears address, customerRef or maintenanceWindow; other nulls mean "not given". */
function toUpdate(input: GqlUpdateSiteInput): UpdateSiteInput {
  const { address, customerRef, maintenanceWindow, freezes, ...rest } = input;
  return {
    ...withoutNulls(rest),
    ...toFreezes(freezes),
    ...(address !== undefined ? { address } : {}),
    ...(customerRef !== undefined ? { customerRef } : {}),
    ...(maintenanceWindow !== undefined ? { maintenanceWindow } : {}),
  };
}

/** Sites: thin adapters over SiteService. */
export const siteResolvers: Resolvers = {
  Query: {
    sites: async (_, args, ctx) => {
      const page = await ctx.services.sites.list(ctx.actor, {
        limit: args.first,
        ...(args.after ? { cursor: args.after } : {}),
        ...(args.search ? { q: args.search } : {}),
      });
      return connection(page.sites, (_s, i) => page.cursors[i]!, page.nextCursor, { totalCount: page.total });
    },
    site: (_, args, ctx) => orNull(ctx.services.sites.get(ctx.actor, args.id)),
  },
  Mutation: {
    createSite: (_, args, ctx) => ctx.services.sites.create(ctx.actor, toCreate(args.input)),
    updateSite: (_, args, ctx) => ctx.services.sites.update(ctx.actor, args.id, toUpdate(args.input)),
    deleteSite: (_, args, ctx) => ctx.services.sites.delete(ctx.actor, args.id),
  },
};
