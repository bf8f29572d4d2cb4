import type { DeviceGateway } from '../devices/device-gateway';
import type { DownloadLinkSigner } from '../firmware/download-links';
import type { Logger } from '../../logger';

/** What a command needs of its update row and firmware. */
export interface CommandRow {
  id: string;
  device_id: string;
  serial: string;
  target_version: string;
  firmware_version_id: string;
  sha256: string;
  size: number | string;
}

/** Commands handed to the broker at once (see publish). */
const PUBLISH_SLICE = 500;

/**
 * Publishes OTA commands on `devices/{serial}/ota`, each with a fresh signed download link. A
 * command that the broker refuses stays `sent` and is re-sent when the device (re)subscribes or
 * by the engine's sweep; this never throws.
 */
export class OtaCommandPublisher {
  private baseUrl = 'http://localhost:8080';

  constructor(
    private readonly deps: {
      gateway: DeviceGateway;
      links: DownloadLinkSigner;
      logger: Logger;
      now: () => Date;
      linkTtlMs: () => number;
      onPublished?: () => void;
    },
  ) {}

  /** PUBLIC_URL (or the bound HTTP address) once the server listens: the base of download links. */
  setBaseUrl(url: string): void {
    this.baseUrl = url;
  }

  async publish(rows: CommandRow[]): Promise<void> {
    if (rows.length === 0) return;
    const expiresAt = Math.floor((this.deps.now().getTime() + this.deps.linkTtlMs()) / 1000);
    // In slices: Aedes delivers a burst of publishes in one synchronous callback chain, and
    // 10,000 at once overflowed the stack and crashed the process (bench/ota.bench.ts). Each
    // counts as published when the broker took it.
    for (let at = 0; at < rows.length; at += PUBLISH_SLICE) await this.publishSlice(rows.slice(at, at + PUBLISH_SLICE), expiresAt);
  }

  private async publishSlice(rows: CommandRow[], expiresAt: number): Promise<void> {
    await Promise.all(
      rows.map(async (r) => {
        const url = this.deps.links.url(this.baseUrl, { jobId: r.id, deviceId: r.device_id, firmwareVersionId: r.firmware_version_id, expiresAt });
        try {
          await this.deps.gateway.publishOta(r.serial, { job_id: r.id, version: r.target_version, url, sha256: r.sha256, size: Number(r.size) });
          this.deps.onPublished?.();
        } catch (err) {
          this.deps.logger.warn({ err, serial: r.serial, jobId: r.id }, 'OTA publish failed; will re-send');
        }
      }),
    );
  }
}
