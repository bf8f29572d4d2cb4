import type { Duplex } from 'node:stream';

/**
 * Gives a connection's `read()` (no size) the meaning Aedes relies on: everything buffered, in
 * one Buffer.
 *
 * Node 26 made `readable.read()` without a size return one buffered chunk instead of all of
 * them (nodejs/node#60441, semver-major in 26.0.0). Aedes 1.2 reads once per `'readable'` event
 * (lib/client.js, nextBatch) and waits for the next event for the rest, so chunks that arrived
 * together stayed unread until more bytes came: a CONNECT sent in several WebSocket frames (as
 * mqtt.js sends it) never got its CONNACK, nor did one over an in-memory stream, and packets
 * buffered while a hook ran waited for the device's next packet. Node 20 to 24 already behave
 * this way; a sized read concatenates on every version.
 */
export function readWholeBuffer(stream: Duplex): void {
  const read = stream.read.bind(stream);
  stream.read = (size?: number): unknown =>
    read(size ?? (stream.readableLength > 0 ? stream.readableLength : undefined)) as unknown;
}
