import { createPrivateKey } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
// @peculiar/x509 registers its providers through tsyringe, which needs the Reflect metadata API first.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

const webCrypto: Crypto = globalThis.crypto;

/** A device's own key (PKCS#8 PEM, never leaves the device) and its signing request for the claim. */
export interface DeviceKeyAndCsr {
  privateKey: string;
  csr: string;
}

/**
 * What a module does on the production line: a fresh P-256 key pair and a PKCS#10 request for it
 * (the service puts the serial in the certificate's CN whatever the request asks; it asks for
 * the serial anyway).
 */
export async function makeKeyAndCsr(serial: string): Promise<DeviceKeyAndCsr> {
  const keys = await webCrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
  const csr = await x509.Pkcs10CertificateRequestGenerator.create(
    { name: [{ CN: [serial] }], keys, signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' } },
    webCrypto,
  );
  const pkcs8 = Buffer.from(await webCrypto.subtle.exportKey('pkcs8', keys.privateKey));
  return {
    privateKey: createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' })
      .export({ format: 'pem', type: 'pkcs8' })
      .toString(),
    csr: csr.toString('pem'),
  };
}

const files = (dir: string, serial: string) => ({
  key: path.join(dir, `${serial}.key`),
  cert: path.join(dir, `${serial}.pem`),
});

/** `--cert-dir`: one `<serial>.key` (mode 0600) and `<serial>.pem` per device, as a module keeps them. */
export async function saveDeviceCertificates(
  dir: string,
  devices: Array<{ serial: string; privateKey: string; certificate: string }>,
): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  for (const d of devices) {
    const f = files(dir, d.serial);
    await writeFile(f.key, d.privateKey, { mode: 0o600 });
    await writeFile(f.cert, d.certificate);
  }
}

/** The key and certificate of each serial from `--cert-dir`; a serial without both files is left out. */
export async function loadDeviceCertificates(
  dir: string,
  serials: string[],
): Promise<Map<string, { privateKey: string; certificate: string }>> {
  const found = new Map<string, { privateKey: string; certificate: string }>();
  for (const serial of serials) {
    const f = files(dir, serial);
    try {
      found.set(serial, { privateKey: await readFile(f.key, 'utf8'), certificate: await readFile(f.cert, 'utf8') });
    } catch {
      // No certificate for this device: it keeps using its password.
    }
  }
  return found;
}
