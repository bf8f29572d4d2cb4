/**
 * Device protocol v1 topic names (docs/device-protocol.md). The one place
 * the broker, the simulator and the tests take them from.
 */
export const TOPIC_ROOT = 'devices';

/** What a device publishes (device to service). */
export const DEVICE_PUBLISH_KINDS = [
  'heartbeat',
  'status',
  'ota/progress',
  'config/reported',
  // Credentials rotation (docs/device-protocol.md): the device confirms a delivery, or asks for a certificate.
  'credentials/ack',
  'csr',
  // Update locks (docs/device-protocol.md "Update locks"): the device says "not now".
  'ota/lock',
  // D4i luminaire data (docs/device-protocol.md "Luminaire data"): every reading is stored.
  'luminaire',
] as const;
export type DevicePublishKind = (typeof DEVICE_PUBLISH_KINDS)[number];

/** What a device subscribes to (service to device). */
export const DEVICE_SUBSCRIBE_KINDS = ['ota', 'config', 'credentials'] as const;
export type DeviceSubscribeKind = (typeof DEVICE_SUBSCRIBE_KINDS)[number];

export type TopicKind = DevicePublishKind | DeviceSubscribeKind;

export const topics = {
  heartbeat: (serial: string) => `${TOPIC_ROOT}/${serial}/heartbeat`,
  status: (serial: string) => `${TOPIC_ROOT}/${serial}/status`,
  ota: (serial: string) => `${TOPIC_ROOT}/${serial}/ota`,
  otaProgress: (serial: string) => `${TOPIC_ROOT}/${serial}/ota/progress`,
  config: (serial: string) => `${TOPIC_ROOT}/${serial}/config`,
  configReported: (serial: string) => `${TOPIC_ROOT}/${serial}/config/reported`,
  /** Service to device, QoS 1, never retained nor queued: a new password or certificate. */
  credentials: (serial: string) => `${TOPIC_ROOT}/${serial}/credentials`,
  credentialsAck: (serial: string) => `${TOPIC_ROOT}/${serial}/credentials/ack`,
  csr: (serial: string) => `${TOPIC_ROOT}/${serial}/csr`,
  otaLock: (serial: string) => `${TOPIC_ROOT}/${serial}/ota/lock`,
  /** Device to service, QoS 1: one D4i reading, acknowledged once stored. */
  luminaire: (serial: string) => `${TOPIC_ROOT}/${serial}/luminaire`,
} as const;

const KINDS = new Set<string>([...DEVICE_PUBLISH_KINDS, ...DEVICE_SUBSCRIBE_KINDS]);

/**
 * Splits `devices/{serial}/{kind}` into its parts; null for anything else. Wildcards are not
 * parsed specially: `+` or `#` as a serial simply never equals a real client's serial, so a
 * filter such as `devices/+/ota` or `devices/#` never matches an ACL rule.
 */
export function parseDeviceTopic(topic: string): { serial: string; kind: TopicKind } | null {
  if (!topic.startsWith(`${TOPIC_ROOT}/`)) return null;
  const rest = topic.slice(TOPIC_ROOT.length + 1);
  const slash = rest.indexOf('/');
  if (slash <= 0) return null;
  const kind = rest.slice(slash + 1);
  if (!KINDS.has(kind)) return null;
  return { serial: rest.slice(0, slash), kind: kind as TopicKind };
}
