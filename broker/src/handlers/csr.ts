import { CertificateRequest } from '#protocol/credential-payloads';
import { parsePayload } from '#protocol/payloads';
import type { TopicHandler } from './context';

/**
 * `devices/{serial}/csr`: the device asks for a certificate (a renewal). Acknowledged once the
 * rotation service answered: issued (the certificate follows on `credentials`) or refused
 * (counted in fleet_device_csr_refused_total{reason}).
 */
export const handleCsr: TopicHandler = (ctx, session, payload) => {
  if (ctx.isWill) return { ok: false, reason: 'invalid' };
  const parsed = parsePayload(CertificateRequest, payload);
  if (!parsed.ok) return parsed;
  return { ok: true, applied: ctx.credentials.requestCertificate(session, parsed.value.csr) };
};
