import type { Client } from 'aedes';
import type { Logger } from '#core/logger';
import { parserOf } from './aedes-internals';

/**
 * Largest MQTT packet accepted on a connection (bytes). Aedes (and mqtt-packet's parser) have
 * no limit: a client announcing a 256 MB PUBLISH would be buffered until it arrived. Device
 * payloads above MAX_DEVICE_PAYLOAD_BYTES (4 KB) but below this are dropped and counted; a
 * packet above this closes the connection before it is buffered.
 */
export const MAX_MQTT_PACKET_BYTES = 64 * 1024;

/**
 * Follows the MQTT framing (fixed header byte, variable-length "remaining length" [MQTT-2.2.3],
 * body) of everything the parser is fed, and closes the connection as soon as a packet
 * announces more than the limit.
 */
export function guardPacketSize(client: Client, logger: Logger, limit = MAX_MQTT_PACKET_BYTES): void {
  // mqtt-packet's parser is internal to Aedes's client; wrapping its parse() sees every byte
  // read from the connection, TCP or WebSocket, before anything is buffered.
  const parser = parserOf(client);
  if (!parser) return;
  const parse = parser.parse.bind(parser);
  let state: 'header' | 'length' | 'body' = 'header';
  let remaining = 0;
  let multiplier = 1;
  let lengthBytes = 0;
  let refused = false;
  parser.parse = (buf: Buffer): number => {
    if (refused) return 0;
    let i = 0;
    while (i < buf.length) {
      if (state === 'body') {
        const take = Math.min(remaining, buf.length - i);
        remaining -= take;
        i += take;
        if (remaining === 0) state = 'header';
      } else if (state === 'header') {
        i += 1;
        state = 'length';
        remaining = 0;
        multiplier = 1;
        lengthBytes = 0;
      } else {
        const byte = buf[i]!;
        i += 1;
        remaining += (byte & 0x7f) * multiplier;
        multiplier *= 128;
        lengthBytes += 1;
        if (remaining > limit || lengthBytes > 4) {
          refused = true;
          logger.warn(
            { serial: client.id, announced: remaining, limit },
            'MQTT packet above the size limit; closing the connection',
          );
          client.close();
          return 0;
        }
        if ((byte & 0x80) === 0) state = remaining > 0 ? 'body' : 'header';
      }
    }
    return parse(buf);
  };
}
