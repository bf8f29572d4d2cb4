import type { Logger } from '#core/logger';
import type { OtaDeviceListener } from '#core/devices/device-gateway';
import { READY_CONCURRENCY } from './broker-limits';

export interface ReadyDevice {
  accountId: string;
  deviceId: string;
  serial: string;
}

/**
 * Device notifications (ready, heard) go to the OTA engine at most READY_CONCURRENCY at a time
 * (a newer one for a serial replaces the queued older one), so a reconnect storm never holds
 * more than that many in flight; the engine batches them into few queries and runs one batch at
 * a time.
 */
export class ReadyNotifier<D extends ReadyDevice = ReadyDevice> {
  /** Pending notifications by serial. */
  private readonly queue = new Map<string, D>();
  private inFlight = 0;
  private closed = false;

  constructor(
    private readonly listener: () => OtaDeviceListener | undefined,
    private readonly logger: Logger,
    private readonly deliver: (listener: OtaDeviceListener, device: D) => Promise<void>,
    private readonly what = 'device ready',
  ) {}

  notify(device: D): void {
    if (!this.listener()) return;
    this.queue.set(device.serial, device);
    this.pump();
  }

  /** Nothing queued is handed over any more (the broker is closing). */
  close(): void {
    this.closed = true;
  }

  private pump(): void {
    while (this.inFlight < READY_CONCURRENCY && this.queue.size > 0) {
      const [serial, device] = this.queue.entries().next().value as [string, D];
      this.queue.delete(serial);
      const listener = this.listener();
      if (!listener || this.closed) return;
      this.inFlight += 1;
      this.deliver(listener, device)
        .catch((err: unknown) => this.logger.error({ err, serial }, `OTA engine failed on ${this.what}`))
        .finally(() => {
          this.inFlight -= 1;
          this.pump();
        });
    }
  }
}
