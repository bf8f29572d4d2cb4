import type { Resolvers } from '../generated/resolvers-types';
import { withoutNulls } from './presenters';

/** Fixture models, firmware versions and the signing key: thin adapters over their services (firmware.graphql). */
export const firmwareResolvers: Resolvers = {
  Query: {
    models: (_, __, ctx) => ctx.services.models.list(ctx.actor),
    firmwareVersions: (_, args, ctx) =>
      ctx.services.firmware.list(ctx.actor, args.model != null ? { model: args.model } : {}),
    firmwareSigningKeys: (_, __, ctx) => ctx.services.signingKeys.get(ctx.actor),
  },
  Mutation: {
    registerModel: (_, args, ctx) => ctx.services.models.register(ctx.actor, withoutNulls(args.input)),
    registerFirmwareSigningKey: (_, args, ctx) =>
      ctx.services.signingKeys.register(ctx.actor, { publicKey: args.input.publicKey }),
    attachFirmwareSignature: (_, args, ctx) =>
      ctx.services.firmware.attachSignature(ctx.actor, { id: args.id, signature: args.input.signature }),
    updateFirmwareVersion: (_, args, ctx) =>
      ctx.services.firmware.update(ctx.actor, { id: args.id, upgrade_from: args.input.upgradeFrom ?? null }),
  },
};
