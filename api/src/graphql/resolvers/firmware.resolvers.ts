import type { GraphQLContext } from '../context';

/** The firmware signing key: thin adapters over SigningKeyService (versions are in deployments.resolvers.ts). */
export const firmwareResolvers = {
  Query: {
    firmwareSigningKeys: (_: unknown, __: unknown, ctx: GraphQLContext) => ctx.services.signingKeys.get(ctx.actor),
  },
  Mutation: {
    registerFirmwareSigningKey: (_: unknown, args: { input: { publicKey: string } }, ctx: GraphQLContext) =>
      ctx.services.signingKeys.register(ctx.actor, { public_key: args.input.publicKey }),
  },
};
