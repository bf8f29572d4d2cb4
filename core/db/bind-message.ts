/**
 * The PostgreSQL wire protocol's Bind message ('B'), as node-postgres asks its connection for it
 * (`connection.bind({ portal, statement, values, binary, valueMapper })`), for the embedded
 * database's connection (pglite-worker-client.ts). PGlite's own serializer measures each string
 * character by character in JavaScript and writes through a growing DataView: for a heartbeat
 * flush of a few hundred rows (arrays of ids, times and readings as text, some 60 KB) it took
 * about 6 ms of the event loop per flush. Here the sizes come from Buffer.byteLength and the
 * strings are written by Buffer.write, both native. The bytes are the same as PGlite's (and
 * node-postgres's pg-protocol's) for the same input: test/unit/bind-message.test.ts.
 */
export interface BindConfig {
  portal?: string;
  statement?: string;
  values?: unknown[];
  binary?: boolean;
  valueMapper?: (value: unknown, index: number) => unknown;
}

const TEXT = 0;
const BINARY = 1;

export function serializeBind(config: BindConfig = {}): Uint8Array {
  const portal = config.portal ?? '';
  const statement = config.statement ?? '';
  const values = config.values ?? [];
  const count = values.length;
  const mapped: Array<string | Uint8Array | null> = new Array<string | Uint8Array | null>(count);
  // 'B', length, portal\0, statement\0, format count, formats, value count, values, result formats.
  let size = 1 + 4 + Buffer.byteLength(portal) + 1 + Buffer.byteLength(statement) + 1 + 2 + 2 * count + 2 + 2;
  for (let i = 0; i < count; i++) {
    const value = config.valueMapper ? config.valueMapper(values[i], i) : values[i];
    let encoded: string | Uint8Array | null;
    if (value === null || value === undefined) encoded = null;
    else if (value instanceof ArrayBuffer) encoded = new Uint8Array(value);
    else if (ArrayBuffer.isView(value)) encoded = new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
    else if (typeof value === 'string') encoded = value;
    else if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') encoded = `${value}`;
    // node-postgres's value mapper has made every other value a string already.
    else encoded = JSON.stringify(value);
    mapped[i] = encoded;
    size += 4 + (encoded === null ? 0 : typeof encoded === 'string' ? Buffer.byteLength(encoded) : encoded.byteLength);
  }
  if (config.binary) size += 2;
  // A view of its own ArrayBuffer (never a slice of Buffer's shared pool).
  const out = Buffer.from(new ArrayBuffer(size));
  let at = 0;
  out[at++] = 0x42; // 'B'
  out.writeInt32BE(size - 1, at);
  at += 4;
  at += out.write(portal, at, 'utf8');
  out[at++] = 0;
  at += out.write(statement, at, 'utf8');
  out[at++] = 0;
  out.writeInt16BE(count, at);
  at += 2;
  for (const encoded of mapped) {
    out.writeInt16BE(encoded !== null && typeof encoded !== 'string' ? BINARY : TEXT, at);
    at += 2;
  }
  out.writeInt16BE(count, at);
  at += 2;
  for (const encoded of mapped) {
    if (encoded === null) {
      out.writeInt32BE(-1, at);
      at += 4;
    } else if (typeof encoded === 'string') {
      const length = out.write(encoded, at + 4, 'utf8');
      out.writeInt32BE(length, at);
      at += 4 + length;
    } else {
      out.writeInt32BE(encoded.byteLength, at);
      out.set(encoded, at + 4);
      at += 4 + encoded.byteLength;
    }
  }
  // Result formats: none listed (all text), or one code for all (binary).
  if (config.binary) {
    out.writeInt16BE(1, at);
    out.writeInt16BE(BINARY, at + 2);
  } else out.writeInt16BE(0, at);
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}
