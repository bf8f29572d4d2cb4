import {
  parseDeviceTopic,
  DEVICE_PUBLISH_KINDS,
  DEVICE_SUBSCRIBE_KINDS,
  type DevicePublishKind,
} from '#protocol/topics';

/**
 * Per-topic ACL of protocol v1 (docs/device-protocol.md): a device publishes only to its own `heartbeat`,
 * `status`, `ota/progress` and `config/reported`, and subscribes only to its own `ota` and
 * `config`. Filters with wildcards (`devices/#`, `#`, `devices/+/ota`) never match: the serial
 * part must equal the device's serial literally, and `+`/`#` are not serial characters.
 */
const PUBLISH = new Set<string>(DEVICE_PUBLISH_KINDS);
const SUBSCRIBE = new Set<string>(DEVICE_SUBSCRIBE_KINDS);

export function publishKindFor(serial: string, topic: string): DevicePublishKind | null {
  const parsed = parseDeviceTopic(topic);
  if (!parsed || parsed.serial !== serial || !PUBLISH.has(parsed.kind)) return null;
  return parsed.kind as DevicePublishKind;
}

export function maySubscribe(serial: string, filter: string): 'ota' | 'config' | null {
  if (filter.includes('#') || filter.includes('+')) return null;
  const parsed = parseDeviceTopic(filter);
  if (!parsed || parsed.serial !== serial || !SUBSCRIBE.has(parsed.kind)) return null;
  return parsed.kind as 'ota' | 'config';
}

/**
 * What the broker may deliver to a device: its own `ota` and `config`, nothing else. The last
 * line of defence behind the subscription ACL, for live, retained and offline-queued delivery
 * alike (Aedes asks `authorizeForward` on each of those paths).
 */
export function mayReceive(serial: string, topic: string): boolean {
  const parsed = parseDeviceTopic(topic);
  return parsed !== null && parsed.serial === serial && SUBSCRIBE.has(parsed.kind);
}
