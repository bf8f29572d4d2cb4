import { z } from 'zod';

/** Wire schema of GET /api/v1/device-endpoints: where devices connect, as the service is bound now. */
export const DeviceEndpointsSchema = z
  .object({
    mqtt_url: z
      .string()
      .nullable()
      .describe('MQTT over TCP (`mqtt://host:port`); null when plain MQTT is off (`MQTT_PORT=off`)'),
    mqtts_url: z
      .string()
      .nullable()
      .describe('MQTT over TLS (`mqtts://host:port`); null without `TLS_CERT_FILE`/`TLS_KEY_FILE`'),
    websocket_url: z
      .string()
      .describe('MQTT over WebSocket on the HTTP port (`ws://host:port/mqtt`, `wss://` with TLS)'),
  })
  .meta({ id: 'DeviceEndpoints' });

export type DeviceEndpoints = z.infer<typeof DeviceEndpointsSchema>;
