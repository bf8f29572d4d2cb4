import type { Resolvers } from '../generated/resolvers-types';

/** The firmware signing key: thin adapters over SigningKeyService (versions are in deployments.resolvers.ts). */
export const firmwareResolvers: Resolvers = {
  Query: {
    firmwareSigningKeys: (_, __, ctx) => ctx.services.signingKeys.get(ctx.actor),
  },
  Mutation: {
    registerFirmwareSigningKey: (_, args, ctx) =>
      ctx.services.signingKeys.register(ctx.actor, { public_key: args.input.publicKey }),
  },
};
