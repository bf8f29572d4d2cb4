import type { DeviceGateway, OtaDeviceListener } from '#core/devices/device-gateway';

/**
 * The services, the broker and the OTA engine are wired by constructor: a test that wants to
 * see (or replace) what one tells another puts own properties over the methods of the object
 * that is called, and deletes them again to restore the prototype's.
 */
function standIn(target: object, methods: Record<string, unknown>): () => void {
  Object.assign(target, methods);
  return () => {
    for (const name of Object.keys(methods)) Reflect.deleteProperty(target, name);
  };
}

export interface GatewayRecording {
  configs: Array<{ serial: string; version: number; config: Record<string, unknown> }>;
  disconnects: Array<{ serial: string; reason: string; certificateFingerprint?: string }>;
  restore(): void;
}

/**
 * Records what the services ask the gateway they were built with (the broker). `passThrough`:
 * the broker still does it; otherwise nothing reaches devices (configuration, commands,
 * disconnects and forgetting are only recorded).
 */
export function recordGateway(gateway: DeviceGateway, options: { passThrough: boolean }): GatewayRecording {
  const real = {
    publishConfig: gateway.publishConfig.bind(gateway),
    publishOta: gateway.publishOta.bind(gateway),
    disconnect: gateway.disconnect.bind(gateway),
    forget: gateway.forget.bind(gateway),
  };
  const recording: GatewayRecording = {
    configs: [],
    disconnects: [],
    restore: standIn(gateway, {
      publishConfig: async (serial: string, message: { version: number; config: Record<string, unknown> }) => {
        recording.configs.push({ serial, ...message });
        if (options.passThrough) await real.publishConfig(serial, message);
      },
      publishOta: async (...args: Parameters<DeviceGateway['publishOta']>) => {
        if (options.passThrough) await real.publishOta(...args);
      },
      disconnect: (serial: string, reason: string, match?: { certificateFingerprint?: string }) => {
        recording.disconnects.push({
          serial,
          reason,
          ...(match?.certificateFingerprint !== undefined
            ? { certificateFingerprint: match.certificateFingerprint }
            : {}),
        });
        if (options.passThrough) real.disconnect(serial, reason, match);
      },
      forget: async (serial: string) => {
        if (options.passThrough) await real.forget(serial);
      },
    }),
  };
  return recording;
}

/** The broker (and the heartbeat ingest) tell `listener` instead of the OTA engine what they hear of devices, until restored. */
export function listenInsteadOfOtaEngine(engine: OtaDeviceListener, listener: OtaDeviceListener): () => void {
  return standIn(engine, {
    onDeviceReady: (input: Parameters<OtaDeviceListener['onDeviceReady']>[0]) => listener.onDeviceReady(input),
    onDeviceHeard: (input: Parameters<OtaDeviceListener['onDeviceHeard']>[0]) => listener.onDeviceHeard(input),
    onProgress: (input: Parameters<OtaDeviceListener['onProgress']>[0]) => listener.onProgress(input),
    onFirmwareReported: (input: Parameters<OtaDeviceListener['onFirmwareReported']>[0]) =>
      listener.onFirmwareReported(input),
  });
}

/** The OTA engine hears about devices itself again. */
export function restoreOtaEngine(engine: OtaDeviceListener): void {
  for (const name of ['onDeviceReady', 'onDeviceHeard', 'onProgress', 'onFirmwareReported'])
    Reflect.deleteProperty(engine, name);
}
