import type { OtaDeviceListener } from './device-gateway';

/**
 * Where the OTA engine registers itself to hear about devices (`services.otaListener.set(...)`).
 * The broker asks for the current listener on every notification, so registration order at
 * start does not matter; with none registered, notifications are skipped.
 */
export class OtaListenerRef {
  private listener: OtaDeviceListener | undefined;
  set(listener: OtaDeviceListener | undefined): void {
    this.listener = listener;
  }
  get(): OtaDeviceListener | undefined {
    return this.listener;
  }
}
