// Order matters: the shim must run before @peculiar/x509 (and tsyringe) are evaluated.
import './reflect-metadata-shim';
import * as x509 from '@peculiar/x509';

/**
 * The X.509 library (@peculiar/x509) and the WebCrypto it runs on. Every call passes `webCrypto`
 * explicitly instead of relying on the library's global provider.
 */
export { x509 };
export const webCrypto: Crypto = globalThis.crypto;
