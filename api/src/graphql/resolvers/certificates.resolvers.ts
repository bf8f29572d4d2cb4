import type { DeviceCertificate } from '#core/certificates/device-certificate.service';
import type { DeviceCertificate as DeviceCertificateType, Resolvers } from '../generated/resolvers-types';

/** Domain certificate to the GraphQL type (the PEM is `pem` here, `certificate` in REST). */
export function presentCertificate(c: DeviceCertificate): DeviceCertificateType {
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

export const certificateResolvers: Resolvers = {
  Query: {
    deviceCa: (_, __, ctx) => ctx.services.certificates.deviceCa(),
  },
  Mutation: {
    issueDeviceCertificate: async (_, args, ctx) =>
      presentCertificate(await ctx.services.certificates.issue(ctx.actor, { serial: args.serial, csr: args.csr })),
    revokeDeviceCertificate: async (_, args, ctx) =>
      presentCertificate(
        await ctx.services.certificates.revoke(ctx.actor, { serial: args.serial, fingerprint: args.fingerprint }),
      ),
  },
  Device: {
    certificates: async (device, _, ctx) =>
      (await ctx.services.certificates.list(ctx.actor, { serial: device.serial })).map(presentCertificate),
  },
};
