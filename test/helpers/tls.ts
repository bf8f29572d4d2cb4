import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export const opensslAvailable = (): boolean => spawnSync('openssl', ['version']).status === 0;
export const mosquittoClientsAvailable = (): boolean =>
  spawnSync('mosquitto_pub', ['--help']).status !== null && spawnSync('which', ['mosquitto_pub']).status === 0;
export const curlAvailable = (): boolean => spawnSync('curl', ['--version']).status === 0;

export interface TlsFiles {
  dir: string;
  caFile: string;
  certFile: string;
  keyFile: string;
}

const openssl = (args: string[], cwd: string) =>
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });

/**
 * A private CA and a server certificate for 127.0.0.1 and localhost signed by it, made with the
 * openssl command line as an operator would (the README's production section uses the same
 * commands). `renew` issues a new server certificate into the same files.
 */
export function makeTlsFiles(): TlsFiles & { renew(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'fleet-tls-'));
  openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      '-days',
      '30',
      '-subj',
      '/CN=Fleet Test CA',
    ],
    dir,
  );
  writeFileSync(path.join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  const issue = () => {
    openssl(
      [
        'req',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        'server.key.new',
        '-out',
        'server.csr',
        '-subj',
        '/CN=127.0.0.1',
      ],
      dir,
    );
    openssl(
      [
        'x509',
        '-req',
        '-in',
        'server.csr',
        '-CA',
        'ca.pem',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-out',
        'server.pem.new',
        '-days',
        '30',
        '-extfile',
        'san.ext',
      ],
      dir,
    );
    // Key first, then certificate, each by rename: a reader never sees a half-written file.
    execFileSync('mv', ['server.key.new', 'server.key'], { cwd: dir });
    execFileSync('mv', ['server.pem.new', 'server.pem'], { cwd: dir });
  };
  issue();
  return {
    dir,
    caFile: path.join(dir, 'ca.pem'),
    certFile: path.join(dir, 'server.pem'),
    keyFile: path.join(dir, 'server.key'),
    renew: issue,
  };
}
