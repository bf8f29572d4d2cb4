import type { GraphQLContext } from '../context';
import type { Device } from '../../domain/devices/device-types';
import type { DeviceCertificate } from '../../domain/certificates/device-certificate.service';

/** Domain certificate to the GraphQL type (the PEM is `pem` here, `certificate` in REST). */
export function presentCertificate(c: DeviceCertificate) {
  return {
    serial: c.serial,
    fingerprintSha256: c.fingerprintSha256,
    serialNumber: c.serialNumber,
    keyAlgorithm: c.keyAlgorithm,
    pem: c.certificatePem,
    notBefore: c.notBefore,
    notAfter: c.notAfter,
    createdAt: c.createdAt,
    revokedAt: c.revokedAt,
    revokedReason: c.revokedReason,
  };
}

export const certificateResolvers = {
  Query: {
    deviceCa: (_: unknown, _args: unknown, ctx: GraphQLContext) => ctx.services.certificates.deviceCa(),
  },
  Mutation: {
    issueDeviceCertificate: async (_: unknown, args: { serial: string; csr: string }, ctx: GraphQLContext) =>
      presentCertificate(await ctx.services.certificates.issue(ctx.actor, { serial: args.serial, csr: args.csr })),
    revokeDeviceCertificate: async (_: unknown, args: { serial: string; fingerprint: string }, ctx: GraphQLContext) =>
      presentCertificate(
        await ctx.services.certificates.revoke(ctx.actor, { serial: args.serial, fingerprint: args.fingerprint }),
      ),
  },
  Device: {
    certificates: async (device: Device, _args: unknown, ctx: GraphQLContext) =>
      (await ctx.services.certificates.list(ctx.actor, { serial: device.serial })).map(presentCertificate),
  },
};
