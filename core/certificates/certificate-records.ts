/**
 * What other areas may write of device certificates inside their own unit of work: the
 * certificates a claim issues, in the claim's transaction, the revocation that goes with an
 * unclaim, and what a renewal over MQTT (devices/credential-rotation.service.ts) records. The
 * certificates area's store stays its own: these are the operations it publishes
 * (test/unit/architecture.test.ts keeps other areas out of its store).
 */
export {
  insertCertificates,
  revokeCertificatesOfDevice,
  revokeOtherCertificatesOfDevice,
  hasUnrevokedCertificate,
  selectCertificateOfDevice,
} from './store/certificates.store';
