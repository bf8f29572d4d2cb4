/**
 * What other areas may write of device certificates inside their own unit of work: the
 * certificates a claim issues, in the claim's transaction, and the revocation that goes with an
 * unclaim or a credential rotation. The certificates area's store stays its own: these are the
 * operations it publishes (test/unit/architecture.test.ts keeps other areas out of its store).
 */
export { insertCertificates, revokeCertificatesOfDevice } from './store/certificates.store';
