import {
  parseDeviceTopic,
  DEVICE_PUBLISH_KINDS,
  DEVICE_SUBSCRIBE_KINDS,
  type DevicePublishKind,
  type DeviceSubscribeKind,
} from '#protocol/topics';

/**
 * Per-topic ACL of protocol v1 (docs/device-protocol.md): a device publishes only to its own `heartbeat`,
 * `status`, `ota/progress`, `config/reported`, `credentials/ack`, `csr` and `luminaire` (DEVICE_PUBLISH_KINDS), and subscribes only
 * to its own `ota`, `config` and `credentials`. Filters with wildcards (`devices/#`, `#`, `devices/+/ota`) never match: the serial
 * part must equal the device's serial literally, and `+`/`#` are not serial characters.
 */
const PUBLISH = new Set<string>(DEVICE_PUBLISH_KINDS);
const SUBSCRIBE = new Set<string>(DEVICE_SUBSCRIBE_KINDS);

export function publishKindFor(serial: string, topic: string): DevicePublishKind | null {
  const parsed = parseDeviceTopic(topic);
  if (!parsed || parsed.serial !== serial || !PUBLISH.has(parsed.kind)) return null;
  return parsed.kind as DevicePublishKind;
}

export function maySubscribe(serial: string, filter: string): DeviceSubscribeKind | null {
  if (filter.includes('#') || filter.includes('+')) return null;
  const parsed = parseDeviceTopic(filter);
  if (!parsed || parsed.serial !== serial || !SUBSCRIBE.has(parsed.kind)) return null;
  return parsed.kind as DeviceSubscribeKind;
}

/**
 * What Aedes may deliver to a device: its own `ota` and `config`, nothing else. The last line of
 * defence behind the subscription ACL, for live, retained and offline-queued delivery alike
 * (Aedes asks `authorizeForward` on each of those paths). Its `credentials` are not among them:
 * they are written to the connection directly (credential-delivery.ts), never routed, stored or
 * queued by Aedes, so a copy that reached Aedes some other way is dropped.
 */
export function mayReceive(serial: string, topic: string): boolean {
  const parsed = parseDeviceTopic(topic);
  return parsed !== null && parsed.serial === serial && SUBSCRIBE.has(parsed.kind) && parsed.kind !== 'credentials';
}

/**
 * Why a publish was refused (the `reason` of fleet_mqtt_publishes_refused_total): another device's
 * topic (a probe, or a serial mixed up), one of the device's own service-to-device topics, or
 * no topic of the protocol at all (a typo such as `heartbeats`).
 */
export type PublishRefusal = 'other_device' | 'service_to_device' | 'not_a_device_topic';

export function publishRefusalOf(serial: string, topic: string): PublishRefusal {
  const parsed = parseDeviceTopic(topic);
  if (!parsed) return 'not_a_device_topic';
  if (parsed.serial !== serial) return 'other_device';
  return SUBSCRIBE.has(parsed.kind) ? 'service_to_device' : 'not_a_device_topic';
}
