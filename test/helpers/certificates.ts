import { X509Certificate, createPrivateKey, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { webCrypto, x509 } from '#core/certificates/x509';

/**
 * What a device does on the production line: generate a key pair and a PKCS#10 request. Made
 * with WebCrypto and @peculiar/x509 here; `opensslCsr` makes one the way the docs tell a
 * firmware engineer to (openssl), where openssl is installed.
 */
export type TestKeyType = 'P-256' | 'P-384' | 'Ed25519' | 'RSA-2048';

export interface TestCsr {
  pem: string;
  /** PKCS#8 PEM, for a TLS client. */
  privateKeyPem: string;
  /** SPKI DER of the public key, to compare with the certificate's. */
  publicKeySpki: Buffer;
}

function keyParams(type: TestKeyType): {
  generate: EcKeyGenParams | RsaHashedKeyGenParams | Algorithm;
  sign: Algorithm | EcdsaParams;
} {
  switch (type) {
    case 'P-256':
      return {
        generate: { name: 'ECDSA', namedCurve: 'P-256' },
        sign: { name: 'ECDSA', hash: 'SHA-256' },
      };
    case 'P-384':
      return {
        generate: { name: 'ECDSA', namedCurve: 'P-384' },
        sign: { name: 'ECDSA', hash: 'SHA-384' },
      };
    case 'Ed25519':
      return { generate: { name: 'Ed25519' }, sign: { name: 'Ed25519' } };
    case 'RSA-2048':
      return {
        generate: {
          name: 'RSASSA-PKCS1-v1_5',
          modulusLength: 2048,
          publicExponent: new Uint8Array([1, 0, 1]),
          hash: 'SHA-256',
        },
        sign: { name: 'RSASSA-PKCS1-v1_5' },
      };
  }
}

export async function makeCsr(input: { type?: TestKeyType; commonName?: string } = {}): Promise<TestCsr> {
  const params = keyParams(input.type ?? 'P-256');
  const keys = (await webCrypto.subtle.generateKey(params.generate, true, ['sign', 'verify'])) as CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create(
    { name: [{ CN: [input.commonName ?? 'whatever-the-device-asks'] }], keys, signingAlgorithm: params.sign },
    webCrypto,
  );
  const pkcs8 = Buffer.from(await webCrypto.subtle.exportKey('pkcs8', keys.privateKey));
  return {
    pem: csr.toString('pem'),
    privateKeyPem: createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' })
      .export({ type: 'pkcs8', format: 'pem' })
      .toString(),
    publicKeySpki: Buffer.from(await webCrypto.subtle.exportKey('spki', keys.publicKey)),
  };
}

/** The same request with one bit of its signature flipped: parses, does not verify. */
export function tamperCsr(pem: string): string {
  const der = Buffer.from(x509.PemConverter.decodeFirst(pem));
  der[der.length - 5]! ^= 0x01;
  return x509.PemConverter.encode(der, 'CERTIFICATE REQUEST');
}

/** What node:tls's getPeerCertificate(true) gives for a PEM certificate (only `raw` matters). */
export function peerCertificate(pem: string): { raw: Buffer; fingerprint256: string } {
  const cert = new X509Certificate(pem);
  return { raw: cert.raw, fingerprint256: cert.fingerprint256 };
}

/** A CA that is not ours and a client certificate it signed for `commonName`. */
export async function foreignCertificate(commonName: string): Promise<string> {
  return (await foreignCertificateWithKey(commonName)).certificate;
}

/** A certificate for `commonName` from a CA that is not ours, with its private key (PKCS#8 PEM), so a TLS client can present it. */
export async function foreignCertificateWithKey(
  commonName: string,
): Promise<{ certificate: string; privateKeyPem: string }> {
  const alg: EcKeyGenParams = { name: 'ECDSA', namedCurve: 'P-256' };
  const sign: EcdsaParams = { name: 'ECDSA', hash: 'SHA-256' };
  const caKeys = await webCrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
  const ca = await x509.X509CertificateGenerator.createSelfSigned(
    {
      name: [{ CN: ['Somebody else'] }],
      keys: caKeys,
      signingAlgorithm: sign,
      serialNumber: '01',
      extensions: [new x509.BasicConstraintsExtension(true, 0, true)],
    },
    webCrypto,
  );
  const leafKeys = await webCrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
  const leaf = await x509.X509CertificateGenerator.create(
    {
      subject: [{ CN: [commonName] }],
      issuer: ca.subjectName,
      publicKey: leafKeys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: sign,
      serialNumber: '02',
    },
    webCrypto,
  );
  const pkcs8 = Buffer.from(await webCrypto.subtle.exportKey('pkcs8', leafKeys.privateKey));
  return {
    certificate: leaf.toString('pem'),
    privateKeyPem: createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }).export({
      format: 'pem',
      type: 'pkcs8',
    }) as string,
  };
}

export function opensslAvailable(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The documented device-side commands: key and CSR with openssl (`ecparam` for P-256, `genpkey` for Ed25519). */
export function opensslCsr(input: { type: 'P-256' | 'Ed25519'; subject: string }): { pem: string; keyPem: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'fleet-csr-'));
  try {
    const key = path.join(dir, 'device.key');
    const csr = path.join(dir, 'device.csr');
    if (input.type === 'P-256')
      execFileSync('openssl', ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key], {
        stdio: 'ignore',
      });
    else execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', key], { stdio: 'ignore' });
    execFileSync('openssl', ['req', '-new', '-key', key, '-subj', input.subject, '-out', csr], { stdio: 'ignore' });
    return { pem: readFileSync(csr, 'utf8'), keyPem: readFileSync(key, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `openssl verify` of a certificate against a CA for TLS client use; returns openssl's output. */
export function opensslVerifyClient(input: { caPem: string; certificatePem: string }): { ok: boolean; output: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'fleet-verify-'));
  try {
    writeFileSync(path.join(dir, 'ca.pem'), input.caPem);
    writeFileSync(path.join(dir, 'cert.pem'), input.certificatePem);
    try {
      const output = execFileSync(
        'openssl',
        ['verify', '-purpose', 'sslclient', '-CAfile', path.join(dir, 'ca.pem'), path.join(dir, 'cert.pem')],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
      );
      return { ok: true, output };
    } catch (error) {
      const e = error as { stdout?: string; stderr?: string };
      return { ok: false, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A self-signed P-256 CA written to files, as a manufacturer would hand over DEVICE_CA_CERT_FILE and DEVICE_CA_KEY_FILE. */
export async function writeCaFiles(
  dir: string,
  options: { ca?: boolean; commonName?: string } = {},
): Promise<{ certFile: string; keyFile: string; certPem: string }> {
  const keys = await webCrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      name: [{ CN: [options.commonName ?? `Acme device CA ${randomBytes(2).toString('hex')}`], O: ['Acme Lighting'] }],
      keys,
      signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
      serialNumber: '0a',
      notAfter: new Date(Date.now() + 20 * 365 * 86_400_000),
      extensions: [
        new x509.BasicConstraintsExtension(options.ca ?? true, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, webCrypto),
      ],
    },
    webCrypto,
  );
  const pkcs8 = Buffer.from(await webCrypto.subtle.exportKey('pkcs8', keys.privateKey));
  // SEC1 ("EC PRIVATE KEY"), what `openssl ecparam -genkey` writes.
  const keyPem = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' })
    .export({ type: 'sec1', format: 'pem' })
    .toString();
  const certFile = path.join(dir, 'device-ca.pem');
  const keyFile = path.join(dir, 'device-ca.key');
  writeFileSync(certFile, cert.toString('pem'));
  writeFileSync(keyFile, keyPem, { mode: 0o600 });
  return { certFile, keyFile, certPem: cert.toString('pem') };
}

/**
 * A TLS server certificate for 127.0.0.1 (subjectAltName IP) and the CA that signed it, written
 * to files as the MQTTS listener takes them; `caPem` is what clients trust.
 */
export async function writeServerCertificate(
  dir: string,
): Promise<{ certFile: string; keyFile: string; caPem: string; caFile: string }> {
  const alg: EcKeyGenParams = { name: 'ECDSA', namedCurve: 'P-256' };
  const sign: EcdsaParams = { name: 'ECDSA', hash: 'SHA-256' };
  const caKeys = await webCrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
  const ca = await x509.X509CertificateGenerator.createSelfSigned(
    {
      name: [{ CN: ['Test server CA'] }],
      keys: caKeys,
      signingAlgorithm: sign,
      serialNumber: '01',
      extensions: [new x509.BasicConstraintsExtension(true, 0, true)],
    },
    webCrypto,
  );
  const keys = await webCrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.create(
    {
      subject: [{ CN: ['127.0.0.1'] }],
      issuer: ca.subjectName,
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: sign,
      serialNumber: '02',
      extensions: [
        new x509.SubjectAlternativeNameExtension([{ type: 'ip', value: '127.0.0.1' }]),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      ],
    },
    webCrypto,
  );
  const pkcs8 = Buffer.from(await webCrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const certFile = path.join(dir, 'server.pem');
  const keyFile = path.join(dir, 'server.key');
  const caFile = path.join(dir, 'server-ca.pem');
  writeFileSync(certFile, cert.toString('pem'));
  writeFileSync(
    keyFile,
    createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }).export({ type: 'pkcs8', format: 'pem' }).toString(),
    { mode: 0o600 },
  );
  writeFileSync(caFile, ca.toString('pem'));
  return { certFile, keyFile, caPem: ca.toString('pem'), caFile };
}
