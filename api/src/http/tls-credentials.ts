import fs from 'node:fs';
import { X509Certificate } from 'node:crypto';
import tls from 'node:tls';
import type { Logger } from '#core/logger';

/** Oldest protocol either listener accepts. */
export const TLS_MIN_VERSION = 'TLSv1.2';

/** How often the certificate files are checked for a change (ms). */
const WATCH_INTERVAL_MS = 2000;

export interface TlsPair {
  cert: Buffer;
  key: Buffer;
}

/** A server whose certificate can be replaced while it runs (node:https and node:tls servers). */
interface Reloadable {
  setSecureContext(options: tls.SecureContextOptions): void;
}

/**
 * The service's certificate and key (PEM, chain allowed), shared by the HTTPS listener and the
 * MQTT-over-TLS listener. A renewed certificate (certbot, an ACME client, a secret mounted by
 * an orchestrator) needs no restart: the files are polled, and when both load as a matching
 * pair every listener switches to them for its next handshakes. A half-written or mismatched
 * pair is logged and the current one kept. Polling rather than fs.watch: renewals usually
 * replace the file (rename, or a symlink swap), which fs.watch stops following.
 */
export class TlsCredentials {
  private current: TlsPair;
  private readonly servers = new Set<Reloadable>();
  private readonly onChange = () => this.reload();
  private watching = false;

  private constructor(
    private readonly files: { certFile: string; keyFile: string },
    private readonly logger: Logger,
    first: TlsPair,
  ) {
    this.current = first;
  }

  /** Reads and checks the pair; a clear error when the files are missing or do not match. */
  static load(files: { certFile: string; keyFile: string }, logger: Logger): TlsCredentials {
    return new TlsCredentials(files, logger, readPair(files));
  }

  /** Options for a node:https or node:tls server. */
  serverOptions(): tls.TlsOptions {
    return { cert: this.current.cert, key: this.current.key, minVersion: TLS_MIN_VERSION };
  }

  /** The CA bundle a client needs to trust this service: the certificate file as it is now. */
  get certificatePem(): string {
    return this.current.cert.toString('utf8');
  }

  /** Keeps `server` on the current pair from now on. */
  attach(server: Reloadable): void {
    this.servers.add(server);
    if (!this.watching) {
      this.watching = true;
      fs.watchFile(this.files.certFile, { interval: WATCH_INTERVAL_MS, persistent: false }, this.onChange);
      fs.watchFile(this.files.keyFile, { interval: WATCH_INTERVAL_MS, persistent: false }, this.onChange);
    }
  }

  /** Reads the files again now (the watcher calls it; tests may too). True when the pair changed. */
  reload(): boolean {
    let next: TlsPair;
    try {
      next = readPair(this.files);
    } catch (error) {
      this.logger.warn(
        { err: error, certFile: this.files.certFile },
        'TLS certificate files changed but do not load as a pair; keeping the current certificate',
      );
      return false;
    }
    if (next.cert.equals(this.current.cert) && next.key.equals(this.current.key)) return false;
    this.current = next;
    for (const server of this.servers) server.setSecureContext(this.serverOptions());
    this.logger.info({ certFile: this.files.certFile, notAfter: notAfter(next.cert) }, 'TLS certificate reloaded');
    return true;
  }

  close(): void {
    if (!this.watching) return;
    this.watching = false;
    fs.unwatchFile(this.files.certFile, this.onChange);
    fs.unwatchFile(this.files.keyFile, this.onChange);
  }
}

function readPair(files: { certFile: string; keyFile: string }): TlsPair {
  let pair: TlsPair;
  try {
    pair = { cert: fs.readFileSync(files.certFile), key: fs.readFileSync(files.keyFile) };
  } catch (error) {
    throw new Error(`TLS_CERT_FILE/TLS_KEY_FILE cannot be read: ${(error as Error).message}`, { cause: error });
  }
  try {
    // Throws when the key does not belong to the certificate, or either is not PEM.
    tls.createSecureContext({ cert: pair.cert, key: pair.key, minVersion: TLS_MIN_VERSION });
  } catch (error) {
    throw new Error(
      `TLS_CERT_FILE and TLS_KEY_FILE do not make a usable certificate and key: ${(error as Error).message}`,
      { cause: error },
    );
  }
  return pair;
}

function notAfter(cert: Buffer): string | undefined {
  try {
    return new Date(new X509Certificate(cert).validTo).toISOString();
  } catch {
    return undefined;
  }
}
