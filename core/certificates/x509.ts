// Order matters: @peculiar/x509 registers its providers through tsyringe, which needs the
// Reflect metadata API when it is evaluated.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

/**
 * The X.509 library (@peculiar/x509) and the WebCrypto it runs on. Every call passes `webCrypto`
 * explicitly instead of relying on the library's global provider.
 */
export { x509 };
export const webCrypto: Crypto = globalThis.crypto;
