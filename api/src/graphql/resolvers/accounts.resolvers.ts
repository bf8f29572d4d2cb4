import type { ApiKey } from '#core/accounts/api-key.service';
import { DEFAULT_RATE_LIMIT_PER_MINUTE } from '#core/accounts/api-key.service';
import type { ApiKey as ApiKeyType, Resolvers } from '../generated/resolvers-types';
import { withoutNulls } from './presenters';

const presentKey = (key: ApiKey): ApiKeyType => ({
  ...key,
  rateLimitPerMinute: key.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT_PER_MINUTE,
});

/** Viewer, users and API keys: thin adapters over the account services. */
export const accountResolvers: Resolvers = {
  Query: {
    viewer: (_, __, ctx) => ({ principal: ctx.actor.principal, role: ctx.actor.role }),
    users: (_, __, ctx) => ctx.services.users.list(ctx.actor),
    apiKeys: async (_, __, ctx) => (await ctx.services.apiKeys.list(ctx.actor)).map(presentKey),
  },
  Viewer: {
    account: async (_, __, ctx) => {
      const account = await ctx.loaders.account.load(ctx.actor.accountId);
      return {
        id: account.id,
        name: account.name,
        quota: account.quota,
        currency: account.currency,
        createdAt: account.createdAt,
      };
    },
    user: (_, __, ctx) => ctx.user ?? null,
    apiKey: async (_, __, ctx) => {
      if (!ctx.actor.apiKeyId) return null;
      const keys = await ctx.services.apiKeys.list({ ...ctx.actor });
      const key = keys.find((k) => k.id === ctx.actor.apiKeyId);
      return key ? presentKey(key) : null;
    },
  },
  Mutation: {
    createUser: (_, args, ctx) => ctx.services.users.create(ctx.actor, withoutNulls(args.input)),
    createApiKey: async (_, args, ctx) => {
      const created = await ctx.services.apiKeys.create(ctx.actor, withoutNulls(args.input));
      return { apiKey: presentKey(created.apiKey), secret: created.secret };
    },
    revokeApiKey: async (_, args, ctx) => presentKey(await ctx.services.apiKeys.revoke(ctx.actor, args.id)),
  },
};
