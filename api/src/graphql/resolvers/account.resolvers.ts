import type { GraphQLContext } from '../context';
import type { ApiKey } from '../../domain/accounts/api-key.service';
import { DEFAULT_RATE_LIMIT_PER_MINUTE } from '../../domain/accounts/api-key.service';
import type { CreateUserInput } from '../../domain/accounts/user.service';
import type { FixtureModel, RegisterModelInput } from '../../domain/models/model.service';

const presentKey = (key: ApiKey) => ({
  ...key,
  rateLimitPerMinute: key.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT_PER_MINUTE,
});

/** Viewer, users, API keys and fixture models: thin adapters over the account services. */
export const accountResolvers = {
  Query: {
    viewer: (_: unknown, __: unknown, ctx: GraphQLContext) => ({
      principal: ctx.actor.principal,
      role: ctx.actor.role,
    }),
    users: (_: unknown, __: unknown, ctx: GraphQLContext) => ctx.services.users.list(ctx.actor),
    apiKeys: async (_: unknown, __: unknown, ctx: GraphQLContext) =>
      (await ctx.services.apiKeys.list(ctx.actor)).map(presentKey),
    models: (_: unknown, __: unknown, ctx: GraphQLContext): Promise<FixtureModel[]> =>
      ctx.services.models.list(ctx.actor),
  },
  Viewer: {
    account: async (_: unknown, __: unknown, ctx: GraphQLContext) => {
      const account = await ctx.loaders.account.load(ctx.actor.accountId);
      return {
        id: account.id,
        name: account.name,
        quota: account.quota,
        currency: account.currency,
        createdAt: account.createdAt,
      };
    },
    user: (_: unknown, __: unknown, ctx: GraphQLContext) => ctx.user ?? null,
    apiKey: async (_: unknown, __: unknown, ctx: GraphQLContext) => {
      if (!ctx.actor.apiKeyId) return null;
      const keys = await ctx.services.apiKeys.list({ ...ctx.actor });
      const key = keys.find((k) => k.id === ctx.actor.apiKeyId);
      return key ? presentKey(key) : null;
    },
  },
  Mutation: {
    createUser: (_: unknown, args: { input: CreateUserInput }, ctx: GraphQLContext) =>
      ctx.services.users.create(ctx.actor, args.input),
    createApiKey: async (
      _: unknown,
      args: { input: { name: string; role?: 'admin' | 'viewer' } },
      ctx: GraphQLContext,
    ) => {
      const created = await ctx.services.apiKeys.create(ctx.actor, args.input);
      return { apiKey: presentKey(created.apiKey), secret: created.secret };
    },
    revokeApiKey: async (_: unknown, args: { id: string }, ctx: GraphQLContext) =>
      presentKey(await ctx.services.apiKeys.revoke(ctx.actor, args.id)),
    registerModel: (_: unknown, args: { input: RegisterModelInput }, ctx: GraphQLContext) =>
      ctx.services.models.register(ctx.actor, args.input),
  },
};
