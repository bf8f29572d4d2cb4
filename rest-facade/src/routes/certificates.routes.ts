import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import { IssueCertificateInput } from '#core/certificates/device-certificate.service';
import { SerialParams } from '../schemas/devices.schemas';
import { DeviceCertificateListSchema, DeviceCertificateSchema } from '../schemas/certificates.schemas';
import { presentCertificate } from '../presenters/certificates.presenter';

const CertificateParams = SerialParams.extend({
  fingerprint: z
    .string()
    .min(1)
    .max(200)
    .describe(
      'SHA-256 fingerprint of the certificate: 64 hex digits, or colon-separated as `openssl x509 -fingerprint -sha256` prints it',
    ),
});

/** Device certificates (mutual TLS on MQTTS) and the device CA that signs them. */
export function certificateRoutes(services: Services): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/device-ca',
      operationId: 'getDeviceCa',
      summary:
        'The device CA certificate (PEM) that signs device certificates; the MQTTS listener accepts client certificates of this CA only',
      tag: 'Device certificates',
      responses: { 200: { description: 'PEM certificate', contentType: 'application/x-pem-file' } },
      handler: async ({ res }) => {
        const ca = await services.certificates.deviceCa();
        res.status(200).type('application/x-pem-file').setHeader('Cache-Control', 'no-cache');
        res.send(ca.pem);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/devices/:serial/certificates',
      operationId: 'issueDeviceCertificate',
      summary:
        "Sign a device certificate from a PEM PKCS#10 request (admin). The subject is CN=<serial> whatever the request asks for; the key is the request's own " +
        '(P-256, P-384, P-521, Ed25519 or RSA 2048-8192), client authentication only. 422 `csr_invalid` when the request is unreadable or its signature does not verify.',
      tag: 'Device certificates',
      params: SerialParams,
      body: IssueCertificateInput,
      idempotent: { requiredRole: 'admin' },
      responses: { 201: { description: 'The certificate', schema: DeviceCertificateSchema } },
      handler: async ({ actor, params, body, unitOfWork }) => ({
        status: 201,
        body: presentCertificate(
          await services.certificates.issue(
            actor,
            { serial: params.serial, csr: body.csr },
            unitOfWork ? { unitOfWork } : {},
          ),
        ),
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/devices/:serial/certificates',
      operationId: 'listDeviceCertificates',
      summary: "A device's certificates, newest first, revoked ones included",
      tag: 'Device certificates',
      params: SerialParams,
      responses: { 200: { description: 'Certificates', schema: DeviceCertificateListSchema } },
      handler: async ({ actor, params }) => ({
        status: 200,
        body: {
          certificates: (await services.certificates.list(actor, { serial: params.serial })).map(presentCertificate),
        },
      }),
    }),
    defineRoute({
      method: 'delete',
      path: '/devices/:serial/certificates/:fingerprint',
      operationId: 'revokeDeviceCertificate',
      summary:
        'Revoke a certificate (admin): refused by every process from now on, and the device sessions that authenticated with it are closed. Revoking again changes nothing.',
      tag: 'Device certificates',
      params: CertificateParams,
      responses: { 200: { description: 'The revoked certificate', schema: DeviceCertificateSchema } },
      handler: async ({ actor, params }) => ({
        status: 200,
        body: presentCertificate(
          await services.certificates.revoke(actor, { serial: params.serial, fingerprint: params.fingerprint }),
        ),
      }),
    }),
  ];
}
