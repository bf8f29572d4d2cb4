import type { DeviceGateway } from '../devices/device-gateway';
import type { DownloadLinkSigner } from '../firmware/download-links';
import type { Logger } from '../logger';
import type { DeltaOffer } from '../firmware/delta/delta-cache';

/** What a command needs of its update and firmware. */
export interface CommandJob {
  /** The update's id: the command's job id. */
  id: string;
  deviceId: string;
  serial: string;
  targetVersion: string;
  firmwareVersionId: string;
  /** The model the firmware is built for (its name). */
  model: string;
  sha256: string;
  size: number;
  /** The binary's key in firmware storage (warmed before the commands go out). */
  storageKey?: string | null;
  /** The version's signature and key id (both null when it was uploaded unsigned). */
  signature?: string | null;
  signingKeyId?: string | null;
}

/**
 * Publishes OTA commands on `devices/{serial}/ota`, each with a fresh signed download link. A
 * command that the broker refuses stays `sent` and is re-sent when the device (re)subscribes or
 * by the engine's sweep; this never throws.
 */
export class OtaCommandPublisher {
  private baseUrl = 'http://localhost:8080';

  /** Commands waiting for a place in the window (FIFO; `head` is the next one). */
  private waiting: Array<{ row: CommandJob; expiresAt: number; delta: DeltaOffer | undefined; done: () => void }> = [];
  private head = 0;
  private inFlight = 0;

  constructor(
    private readonly deps: {
      gateway: DeviceGateway;
      links: DownloadLinkSigner;
      logger: Logger;
      now: () => Date;
      linkTtlMs: () => number;
      onPublished?: () => void;
      /** A publish the broker has not confirmed after this long gives up its place (re-sent later). Default 30 s. */
      publishTimeoutMs?: number;
      /** Loads a binary into memory before devices are told to fetch it (FirmwareStorage.warm). */
      warm?: (storageKey: string, size: number) => Promise<void>;
      /** The deltas these updates' commands offer (DeltaCache.offers); none when absent or when it fails. */
      deltas?: (updateIds: string[]) => Promise<Map<string, DeltaOffer>>;
    },
  ) {}

  /** PUBLIC_URL (or the bound HTTP address) once the server listens: the base of download links. */
  setBaseUrl(url: string): void {
    this.baseUrl = url;
  }

  /**
   * Publishes the rows and resolves when the broker took (or refused) each of them. Every call
   * shares one window of the process: dispatch pages overlap (a page is published while the
   * next is written, and several deployments dispatch at once), and windows per call added up.
   */
  async publish(rows: CommandJob[]): Promise<void> {
    if (rows.length === 0) return;
    const files = new Map(rows.filter((r) => r.storageKey).map((r) => [r.storageKey!, r.size]));
    if (this.deps.warm) await Promise.all([...files].map(([key, size]) => this.deps.warm!(key, size)));
    const deltas = await this.deltasOf(rows);
    const expiresAt = Math.floor((this.deps.now().getTime() + this.deps.linkTtlMs()) / 1000);
    await new Promise<void>((resolve) => {
      let left = rows.length;
      const done = () => {
        if (--left === 0) resolve();
      };
      for (const row of rows) this.waiting.push({ row, expiresAt, delta: deltas.get(row.id), done });
      this.pump();
    });
  }

  /**
   * A window, not the whole list: MQEmitter releases its queued messages synchronously when a
   * device has no subscription here, and 10,000 queued at once overflowed the stack and crashed
   * the process (bench/ota.bench.ts). Nor slice by slice: waiting for a whole slice stalled
   * every slice on its slowest delivery while 10,000 devices were already answering. The broker
   * says how many it takes at once without queueing (DeviceGateway.publishWindow).
   */
  private pump(): void {
    const window = Math.max(1, this.deps.gateway.publishWindow);
    while (this.inFlight < window && this.head < this.waiting.length) {
      const item = this.waiting[this.head++]!;
      this.inFlight++;
      // publishOne never throws; `finally` runs in a later microtask, so this never recurses deeply.
      void this.publishOne(item.row, item.expiresAt, item.delta).finally(() => {
        this.inFlight--;
        item.done();
        this.pump();
      });
    }
    if (this.head === this.waiting.length) {
      this.waiting = [];
      this.head = 0;
    } else if (this.head > 4096) {
      this.waiting = this.waiting.slice(this.head);
      this.head = 0;
    }
  }

  /** A delta is an offer: when they cannot be read, commands go with the full image only. */
  private async deltasOf(rows: CommandJob[]): Promise<Map<string, DeltaOffer>> {
    if (!this.deps.deltas) return new Map();
    try {
      return await this.deps.deltas(rows.map((r) => r.id));
    } catch (err) {
      this.deps.logger.warn({ err, jobs: rows.length }, 'delta offers unavailable; sending full images');
      return new Map();
    }
  }

  /** Counts as published when the broker took it. */
  private async publishOne(r: CommandJob, expiresAt: number, delta: DeltaOffer | undefined): Promise<void> {
    const url = this.deps.links.url(this.baseUrl, {
      jobId: r.id,
      deviceId: r.deviceId,
      firmwareVersionId: r.firmwareVersionId,
      expiresAt,
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      // A delivery the broker never confirms (a device that stopped reading, a broker closing)
      // must not hold its place in the shared window for ever: the command stays `sent`.
      const gaveUp = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`broker did not take the command within ${this.publishTimeoutMs} ms`)),
          this.publishTimeoutMs,
        );
        timer.unref();
      });
      const signed = r.signature && r.signingKeyId ? { signature: { value: r.signature, keyId: r.signingKeyId } } : {};
      await Promise.race([
        this.deps.gateway.publishOta(r.serial, {
          jobId: r.id,
          version: r.targetVersion,
          model: r.model,
          url,
          sha256: r.sha256,
          size: r.size,
          ...signed,
          ...(delta
            ? {
                delta: {
                  from: delta.from,
                  url: this.deps.links.deltaUrl(this.baseUrl, {
                    jobId: r.id,
                    deviceId: r.deviceId,
                    deltaId: delta.deltaId,
                    expiresAt,
                  }),
                  sha256: delta.sha256,
                  size: delta.size,
                  format: delta.format,
                },
              }
            : {}),
        }),
        gaveUp,
      ]);
      this.deps.onPublished?.();
    } catch (err) {
      this.deps.logger.warn({ err, serial: r.serial, jobId: r.id }, 'OTA publish failed; will re-send');
    } finally {
      clearTimeout(timer);
    }
  }

  private get publishTimeoutMs(): number {
    return this.deps.publishTimeoutMs ?? 30_000;
  }
}
