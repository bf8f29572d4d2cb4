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
  /** The binary's key in firmware storage (warmed before the commands go out). */
  storage_key?: string | null;
}

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
      /** Loads a binary into memory before devices are told to fetch it (FirmwareStorage.warm). */
      warm?: (storageKey: string, size: number) => Promise<void>;
    },
  ) {}

  /** PUBLIC_URL (or the bound HTTP address) once the server listens: the base of download links. */
  setBaseUrl(url: string): void {
    this.baseUrl = url;
  }

  async publish(rows: CommandRow[]): Promise<void> {
    if (rows.length === 0) return;
    const files = new Map(rows.filter((r) => r.storage_key).map((r) => [r.storage_key!, Number(r.size)]));
    if (this.deps.warm) await Promise.all([...files].map(([key, size]) => this.deps.warm!(key, size)));
    const expiresAt = Math.floor((this.deps.now().getTime() + this.deps.linkTtlMs()) / 1000);
    // A window, not the whole list: MQEmitter releases its queued messages synchronously when a
    // device has no subscription here, and 10,000 queued at once overflowed the stack and crashed
    // the process (bench/ota.bench.ts). Nor slice by slice: waiting for a whole slice stalled
    // every slice on its slowest delivery while 10,000 devices were already answering.
    let next = 0;
    const worker = async () => {
      while (next < rows.length) await this.publishOne(rows[next++]!, expiresAt);
    };
    // The broker says how many it takes at once without queueing (DeviceGateway.publishWindow).
    await Promise.all(Array.from({ length: Math.min(Math.max(1, this.deps.gateway.publishWindow), rows.length) }, worker));
  }

  /** Counts as published when the broker took it. */
  private async publishOne(r: CommandRow, expiresAt: number): Promise<void> {
    const url = this.deps.links.url(this.baseUrl, { jobId: r.id, deviceId: r.device_id, firmwareVersionId: r.firmware_version_id, expiresAt });
    try {
      await this.deps.gateway.publishOta(r.serial, { job_id: r.id, version: r.target_version, url, sha256: r.sha256, size: Number(r.size) });
      this.deps.onPublished?.();
    } catch (err) {
      this.deps.logger.warn({ err, serial: r.serial, jobId: r.id }, 'OTA publish failed; will re-send');
    }
  }
}
