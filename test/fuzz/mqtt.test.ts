import fc from 'fast-check';
import mqttPacket from 'mqtt-packet';
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { FuzzService } from './harness/service-child';
import { FuzzRunner, fuzzSeed, type CaseResult } from './harness/fuzz';
import { exchange, seedDevices, wsFrame, wsPayloads, type Exchange } from './harness/wire';
import { hostileJson, nastyString, protoKeyed, sometimes } from './harness/arbitraries';
import { ifStarted } from '../helpers/teardown';

/**
 * Fuzzes the MQTT listener (TCP, and the same bytes over ws://…/mqtt): packets mqtt-packet
 * encodes from fuzzed fields (CONNECT with odd client ids, usernames, passwords, protocol
 * levels and wills; PUBLISH to odd topics with hostile payloads; SUBSCRIBE to odd filters), then
 * mutated (bytes flipped, lengths rewritten, cut, repeated), pure garbage, and sessions of a
 * claimed device that connects properly and then misbehaves. The broker drops what it must
 * drop and keeps serving: after each batch a CONNECT is still answered with a CONNACK.
 */

interface Creds {
  serial: string;
  password: string;
}

type PacketSpec =
  | {
      cmd: 'connect';
      clientId: string;
      username: string | null;
      password: string | null;
      version: 3 | 4 | 5;
      clean: boolean;
      keepalive: number;
      will: { topic: string; payload: string; qos: 0 | 1 | 2; retain: boolean } | null;
    }
  | { cmd: 'publish'; topic: string; payload: string; qos: 0 | 1 | 2; retain: boolean; dup: boolean; messageId: number }
  | { cmd: 'subscribe'; filters: Array<{ topic: string; qos: 0 | 1 | 2 }>; messageId: number }
  | { cmd: 'unsubscribe'; topics: string[]; messageId: number }
  | { cmd: 'pingreq' | 'disconnect' }
  | { cmd: 'puback' | 'pubrec' | 'pubrel' | 'pubcomp'; messageId: number };

type Mutation =
  | { kind: 'none' }
  | { kind: 'flip'; at: number; xor: number }
  | { kind: 'cut'; at: number }
  | { kind: 'length'; bytes: number[] }
  | { kind: 'append'; bytes: number[] }
  | { kind: 'repeat'; times: number };

interface MqttCase {
  transport: 'tcp' | 'ws';
  /** `open`: first a proper CONNECT of a claimed device, then the packets once it is accepted. */
  session: { device: number } | null;
  packets: Array<{ packet: PacketSpec; mutation: Mutation }>;
  garbage: string | null;
  settleMs: number;
}

const topicArb = (serials: string[]) =>
  fc.oneof(
    {
      arbitrary: fc
        .tuple(
          fc.constantFrom(...serials, 'OTHER-1', '+', '#', ''),
          fc.constantFrom('heartbeat', 'status', 'ota/progress', 'config/reported', 'ota', 'config', 'x', ''),
        )
        .map(([s, k]) => `devices/${s}/${k}`),
      weight: 5,
    },
    {
      arbitrary: fc.constantFrom(
        '#',
        '+/+',
        '$SYS/broker',
        '$SYS/#',
        '',
        '/',
        '//',
        'devices',
        'devices/',
        'devices//heartbeat',
        'a/#/b',
        'a\u0000b',
        'x'.repeat(70_000),
      ),
      weight: 2,
    },
    { arbitrary: nastyString(30), weight: 1 },
  );

const payloadArb = fc.oneof(
  { arbitrary: hostileJson.map((v) => JSON.stringify(v)), weight: 3 },
  {
    arbitrary: fc
      .record(
        {
          firmware: fc.oneof(fc.constantFrom('1.0.0', '9.9.9', ''), nastyString(10)),
          ip: fc.oneof(fc.constantFrom('10.0.0.1', '999.1.1.1', '::1'), nastyString(10)),
          uptime_s: fc.oneof(fc.integer(), fc.constantFrom(1e308, -1, 2 ** 53)),
          rssi: fc.oneof(fc.integer({ min: -200, max: 50 }), fc.constant('x')),
          state: fc.constantFrom('online', 'offline', 'rebooting', '__proto__'),
          job_id: fc.oneof(fc.uuid(), nastyString(10)),
          step: fc.constantFrom('downloading', 'installing', 'succeeded', 'failed', 'x'),
          progress: fc.oneof(fc.integer({ min: -5, max: 105 }), fc.constant(1.5)),
          version: fc.oneof(fc.integer(), nastyString(5)),
        },
        { requiredKeys: [] },
      )
      .map((o) => JSON.stringify(o)),
    weight: 3,
  },
  { arbitrary: protoKeyed(hostileJson), weight: 1 },
  { arbitrary: fc.constantFrom('', '{', 'null', '[]', '"x"', 'x'.repeat(5000), '{"firmware":"1.0.0"}'), weight: 1 },
  { arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b).toString('latin1')), weight: 1 },
);

const qosArb = fc.constantFrom<0 | 1 | 2>(0, 0, 1, 1, 2);

function packetArb(creds: Creds[]): fc.Arbitrary<PacketSpec> {
  const serials = creds.map((c) => c.serial);
  const idArb = fc.oneof(
    fc.constantFrom(...serials, '', 'constructor', '__proto__', 'OTHER-1', '+', '#', 'x'.repeat(65_000)),
    nastyString(20),
  );
  return fc.oneof(
    {
      arbitrary: fc.record({
        cmd: fc.constant('connect' as const),
        clientId: idArb,
        username: sometimes(idArb, 0.8),
        password: sometimes(fc.oneof(fc.constantFrom(...creds.map((c) => c.password), 'wrong'), nastyString(20)), 0.8),
        version: fc.constantFrom<3 | 4 | 5>(4, 4, 4, 3, 5),
        clean: fc.boolean(),
        keepalive: fc.constantFrom(0, 1, 30, 65_535),
        will: sometimes(
          fc.record({ topic: topicArb(serials), payload: payloadArb, qos: qosArb, retain: fc.boolean() }),
          0.3,
        ),
      }),
      weight: 3,
    },
    {
      arbitrary: fc.record({
        cmd: fc.constant('publish' as const),
        topic: topicArb(serials),
        payload: payloadArb,
        qos: qosArb,
        retain: fc.boolean(),
        dup: fc.boolean(),
        messageId: fc.constantFrom(0, 1, 2, 65_535),
      }),
      weight: 5,
    },
    {
      arbitrary: fc.record({
        cmd: fc.constant('subscribe' as const),
        filters: fc.array(fc.record({ topic: topicArb(serials), qos: qosArb }), { minLength: 1, maxLength: 4 }),
        messageId: fc.constantFrom(0, 1, 65_535),
      }),
      weight: 2,
    },
    {
      arbitrary: fc.record({
        cmd: fc.constant('unsubscribe' as const),
        topics: fc.array(topicArb(serials), { minLength: 1, maxLength: 3 }),
        messageId: fc.constantFrom(0, 1),
      }),
      weight: 1,
    },
    { arbitrary: fc.record({ cmd: fc.constantFrom('pingreq' as const, 'disconnect' as const) }), weight: 1 },
    {
      arbitrary: fc.record({
        cmd: fc.constantFrom('puback' as const, 'pubrec' as const, 'pubrel' as const, 'pubcomp' as const),
        messageId: fc.constantFrom(0, 1, 7, 65_535),
      }),
      weight: 1,
    },
  );
}

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: fc.constant({ kind: 'none' as const }), weight: 6 },
  {
    arbitrary: fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), xor: fc.integer({ min: 1, max: 255 }) }),
    weight: 2,
  },
  { arbitrary: fc.record({ kind: fc.constant('cut' as const), at: fc.nat() }), weight: 2 },
  {
    arbitrary: fc.record({
      kind: fc.constant('length' as const),
      bytes: fc.oneof(
        fc.constantFrom<number[]>(
          [0x00],
          [0x7f],
          [0xff, 0x7f],
          [0xff, 0xff, 0xff, 0x7f],
          [0xff, 0xff, 0xff, 0xff, 0x7f],
          [0x80],
        ),
        fc.array(fc.nat(255), { minLength: 1, maxLength: 5 }),
      ),
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('append' as const),
      bytes: fc.array(fc.nat(255), { minLength: 1, maxLength: 20 }),
    }),
    weight: 1,
  },
  { arbitrary: fc.record({ kind: fc.constant('repeat' as const), times: fc.integer({ min: 2, max: 60 }) }), weight: 1 },
);

/** mqtt-packet's encoding of the fields (its own checks refuse some: then a hand-made frame). */
function encode(p: PacketSpec): Buffer {
  try {
    switch (p.cmd) {
      case 'connect':
        return mqttPacket.generate({
          cmd: 'connect',
          protocolId: p.version === 3 ? 'MQIsdp' : 'MQTT',
          protocolVersion: p.version,
          clientId: p.clientId,
          clean: p.clean,
          keepalive: p.keepalive,
          ...(p.username !== null ? { username: p.username } : {}),
          ...(p.password !== null ? { password: Buffer.from(p.password) } : {}),
          ...(p.will ? { will: { ...p.will, payload: Buffer.from(p.will.payload, 'latin1') } } : {}),
        });
      case 'publish':
        return mqttPacket.generate({
          cmd: 'publish',
          topic: p.topic,
          payload: Buffer.from(p.payload, 'latin1'),
          qos: p.qos,
          retain: p.retain,
          dup: p.dup,
          ...(p.qos > 0 ? { messageId: p.messageId } : {}),
        });
      case 'subscribe':
        return mqttPacket.generate({ cmd: 'subscribe', subscriptions: p.filters, messageId: p.messageId });
      case 'unsubscribe':
        return mqttPacket.generate({ cmd: 'unsubscribe', unsubscriptions: p.topics, messageId: p.messageId });
      case 'pingreq':
        return mqttPacket.generate({ cmd: 'pingreq' });
      case 'disconnect':
        return mqttPacket.generate({ cmd: 'disconnect' });
      default:
        return mqttPacket.generate({ cmd: p.cmd, messageId: p.messageId });
    }
  } catch {
    // Fields mqtt-packet will not encode (a message id of 0, say): the same frame by hand.
    const body = Buffer.from(JSON.stringify(p));
    return Buffer.concat([Buffer.from([0x30]), remainingLength(body.length), body]);
  }
}

function remainingLength(n: number): Buffer {
  const out: number[] = [];
  do {
    let byte = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) byte |= 0x80;
    out.push(byte);
  } while (n > 0);
  return Buffer.from(out);
}

function mutate(bytes: Buffer, m: Mutation): Buffer {
  switch (m.kind) {
    case 'none':
      return bytes;
    case 'flip': {
      const copy = Buffer.from(bytes);
      const at = m.at % copy.length;
      copy[at] = copy[at]! ^ m.xor;
      return copy;
    }
    case 'cut':
      return bytes.subarray(0, m.at % bytes.length);
    case 'length': {
      // Replace the remaining-length field (bytes after the first until one without the high bit).
      let end = 1;
      while (end < bytes.length && end < 5 && (bytes[end]! & 0x80) !== 0) end += 1;
      return Buffer.concat([bytes.subarray(0, 1), Buffer.from(m.bytes), bytes.subarray(end + 1)]);
    }
    case 'append':
      return Buffer.concat([bytes, Buffer.from(m.bytes)]);
    case 'repeat':
      // Many copies of a small packet (a burst), a few of a big one.
      return Buffer.concat(Array.from({ length: Math.min(m.times, Math.ceil(200_000 / bytes.length)) }, () => bytes));
  }
}

function mqttCaseArb(creds: Creds[]): fc.Arbitrary<MqttCase> {
  return fc.record({
    transport: fc.constantFrom<MqttCase['transport']>('tcp', 'tcp', 'tcp', 'ws'),
    session: sometimes(fc.record({ device: fc.nat(creds.length - 1) }), 0.45),
    packets: fc.array(fc.record({ packet: packetArb(creds), mutation: mutationArb }), { minLength: 0, maxLength: 5 }),
    garbage: sometimes(
      fc.uint8Array({ minLength: 1, maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')),
      0.2,
    ),
    settleMs: fc.constantFrom(0, 0, 30, 150),
  });
}

const connectOf = (c: Creds): Buffer =>
  mqttPacket.generate({
    cmd: 'connect',
    protocolId: 'MQTT',
    protocolVersion: 4,
    clientId: c.serial,
    username: c.serial,
    password: Buffer.from(c.password),
    clean: true,
    keepalive: 30,
  });

const WS_HEAD =
  'GET /mqtt HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
  'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n';

/** The bytes of a case: the session's CONNECT (if any), then the fuzzed packets and garbage. */
function bytesOf(c: MqttCase, creds: Creds[]): { first: Buffer | null; rest: Buffer } {
  const first = c.session ? connectOf(creds[c.session.device]!) : null;
  const rest = Buffer.concat([
    ...c.packets.map(({ packet, mutation }) => mutate(encode(packet), mutation)),
    ...(c.garbage !== null ? [Buffer.from(c.garbage, 'latin1')] : []),
  ]);
  return { first, rest };
}

/** The return code of the CONNACK that starts what came back over TCP, or null. */
const connack = (data: Buffer): number | null =>
  data.length >= 4 && data[0] === 0x20 && data[1] === 0x02 ? data[3]! : null;
/** The same over WebSocket, where the packet comes in binary frames (Aedes sends one per write). */
const wsConnack = (data: Buffer): number | null => connack(wsPayloads(data));

async function sendMqtt(service: FuzzService, c: MqttCase, creds: Creds[]): Promise<CaseResult> {
  const { first, rest } = bytesOf(c, creds);
  let ex: Exchange;
  if (c.transport === 'tcp') {
    ex = first
      ? await exchange(service.mqttPort, first, {
          rest: [rest],
          ready: (d) => connack(d) !== null,
          settleMs: c.settleMs,
        })
      : await exchange(service.mqttPort, rest, {
          settleMs: c.settleMs,
          // A CONNECT waits a moment for its CONNACK (credentials are checked asynchronously).
          ...(c.packets[0]?.packet.cmd === 'connect' ? { after: 'end-when-idle' as const, idleMs: 150 } : {}),
        });
  } else {
    // Over ws://…/mqtt: the handshake, then each part as binary frames (split in two to try reassembly).
    const frames = (b: Buffer) =>
      b.length > 1
        ? [wsFrame(b.subarray(0, b.length >> 1), 2, false), wsFrame(b.subarray(b.length >> 1), 0, true)]
        : [wsFrame(b, 2)];
    const head = Buffer.from(WS_HEAD);
    ex = first
      ? await exchange(service.httpPort, Buffer.concat([head, ...frames(first)]), {
          rest: rest.length ? frames(rest) : [],
          ready: (d) => wsConnack(d) !== null,
          settleMs: c.settleMs,
        })
      : await exchange(service.httpPort, head, {
          rest: rest.length ? frames(rest) : [],
          ready: (d) => d.includes('\r\n\r\n'),
          settleMs: c.settleMs,
        });
  }
  const problems: string[] = [];
  if (ex.end === 'timeout')
    problems.push('the broker kept the connection open for seconds after the client had closed its side');
  const code = c.transport === 'ws' ? wsConnack(ex.data) : connack(ex.data);
  const outcome = `${c.transport} ${c.session ? 'session ' : ''}${code !== null ? `connack ${code}` : ex.data.length ? 'answered' : 'closed'}`;
  return { problems, clientPorts: ex.localPort ? [ex.localPort] : [], outcome };
}

const showCase = (c: MqttCase, creds: Creds[]): string => {
  const { first, rest } = bytesOf(c, creds);
  const how = c.transport === 'ws' ? 'over ws://…/mqtt (binary frames)' : 'over TCP';
  return (
    `${how}: ${first ? `CONNECT of ${creds[c.session!.device]!.serial} (hex ${first.toString('hex')}), after its CONNACK ` : ''}` +
    `bytes (hex) ${rest.toString('hex')}${c.settleMs ? `, closing after ${c.settleMs} ms` : ''}; packets ${JSON.stringify(c.packets)}`
  );
};

describe('fuzz: MQTT packets, mutated and garbage, over TCP and WebSocket', () => {
  let service: FuzzService;
  let runner: FuzzRunner;
  let creds: Creds[];

  /** The broker still answers: a claimed device's CONNECT is accepted, a wrong password refused. */
  const brokerAnswers = async (): Promise<string[]> => {
    const problems: string[] = [];
    const good = await exchange(service.mqttPort, connectOf(creds[0]!), {
      ready: (d) => connack(d) !== null,
      settleMs: 10,
    });
    if (connack(good.data) !== 0)
      problems.push(`a claimed device's CONNECT got ${connack(good.data) ?? 'no CONNACK'}, not 0`);
    const bad = await exchange(service.mqttPort, connectOf({ ...creds[1]!, password: 'wrong' }), {
      after: 'end-when-idle',
      idleMs: 500,
    });
    const refused = connack(bad.data);
    if (refused === null || refused === 0)
      problems.push(`a wrong password got ${refused ?? 'no CONNACK'}, not a refusal`);
    return problems;
  };

  beforeAll(async () => {
    service = await FuzzService.start();
    runner = new FuzzRunner(service, fuzzSeed());
    creds = await seedDevices(service, ['MQ-0001', 'MQ-0002', 'MQ-0003']);
  }, 180_000);
  afterAll(async () => ifStarted(service)?.close());

  it('has a broker that accepts a claimed device and refuses a wrong password', async () => {
    expect(await brokerAnswers()).toEqual([]);
  });

  it('drops malformed and hostile MQTT input and keeps serving', { timeout: 600_000 }, async () => {
    await runner.run({
      name: 'MQTT packets',
      runs: 400,
      batchSize: 50,
      arbitrary: mqttCaseArb(creds),
      show: (c) => showCase(c, creds),
      send: (c) => sendMqtt(service, c, creds),
      afterBatch: brokerAnswers,
    });
  });
});
