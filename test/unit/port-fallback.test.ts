import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { portFallback } from '#core/config';
import { listenWithFallback } from '#api/port-fallback';
import { startBanner } from '#api/start-banner';

/** A listen function over a set of taken ports; port 0 binds the next free one from 40000. */
function fakeListener(taken: Set<number>) {
  let next = 40_000;
  const bound: number[] = [];
  const listen = (port: number): Promise<number> => {
    if (taken.has(port)) return Promise.reject(Object.assign(new Error('taken'), { code: 'EADDRINUSE' }));
    while (port === 0 && taken.has(next)) next++;
    const chosen = port === 0 ? next++ : port;
    bound.push(chosen);
    return Promise.resolve(chosen);
  };
  return { listen, bound };
}

/**
 * Issue 27 item 1: `npm start` where another broker holds 1883. Only a start with no MQTT_PORT,
 * DATABASE_URL, TLS files or REDIS_URL moves MQTT to a free port, and remembers it in DATA_DIR.
 */
describe('zero-configuration MQTT port fallback', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });
  const dataDir = async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'fleet-ports-'));
    dirs.push(dir);
    return dir;
  };

  it('only a start without MQTT_PORT, DATABASE_URL, TLS files and REDIS_URL may fall back', () => {
    expect(portFallback({})).toEqual({ defaultMqttPort: 1883 });
    expect(portFallback({ PORT: '9000', DATA_DIR: '/srv/fleet', MQTT_PORT: '' })).toEqual({ defaultMqttPort: 1883 });
    for (const configured of [
      { MQTT_PORT: '1883' },
      { MQTT_PORT: '0' },
      { DATABASE_URL: 'postgres://db/fleet' },
      { TLS_CERT_FILE: 'server.pem', TLS_KEY_FILE: 'server.key' },
      { TLS_KEY_FILE: 'server.key' },
      { REDIS_URL: 'redis://cache' },
    ])
      expect(portFallback({ ...configured, FLEET_DEFAULT_MQTT_PORT: '41883' })).toBeNull();
    // Tests never assume 1883: they hold a port of their own and name it.
    expect(portFallback({ FLEET_DEFAULT_MQTT_PORT: '41883' })).toEqual({ defaultMqttPort: 41883 });
    expect(() => portFallback({ FLEET_DEFAULT_MQTT_PORT: 'x' })).toThrow(
      'FLEET_DEFAULT_MQTT_PORT=x: expected a port number from 1 to 65535',
    );
  });

  it('default port free: listens there and remembers nothing', async () => {
    const dir = await dataDir();
    const { listen } = fakeListener(new Set());
    expect(await listenWithFallback({ listen, dataDir: dir, defaultPort: 41883 })).toEqual({
      port: 41883,
      fallback: null,
    });
    expect(existsSync(path.join(dir, 'ports.json'))).toBe(false);
  });

  it('default port taken: a free port, remembered and used again; taken too: a new one; default free again: back', async () => {
    const dir = await dataDir();
    const file = path.join(dir, 'ports.json');
    const taken = new Set([41883]);

    const first = await listenWithFallback({ listen: fakeListener(taken).listen, dataDir: dir, defaultPort: 41883 });
    expect(first).toEqual({ port: 40_000, fallback: { kind: 'moved', port: 40_000, defaultPort: 41883, file } });
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ mqtt: 40_000 });

    // The next start keeps the port, even once the default one is free again.
    const fake = fakeListener(new Set());
    const second = await listenWithFallback({ listen: fake.listen, dataDir: dir, defaultPort: 41883 });
    expect(second).toEqual({ port: 40_000, fallback: { kind: 'remembered', port: 40_000, defaultPort: 41883, file } });
    expect(fake.bound).toEqual([40_000]);

    // Both taken: a new port, remembered instead, and said so.
    taken.add(40_000);
    const third = await listenWithFallback({ listen: fakeListener(taken).listen, dataDir: dir, defaultPort: 41883 });
    expect(third.fallback).toEqual({
      kind: 'moved-again',
      port: third.port,
      previous: 40_000,
      defaultPort: 41883,
      file,
    });
    expect(third.port).toBe(40_001);
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ mqtt: third.port });

    // The remembered port taken, the default one free: back on the default, memory gone.
    const back = await listenWithFallback({
      listen: fakeListener(new Set([third.port])).listen,
      dataDir: dir,
      defaultPort: 41883,
    });
    expect(back).toEqual({
      port: 41883,
      fallback: { kind: 'back-to-default', port: 41883, previous: third.port, file },
    });
    expect(existsSync(file)).toBe(false);
  });

  it('an unreadable memory is written anew; an error other than a taken port ends the start', async () => {
    const dir = await dataDir();
    await writeFile(path.join(dir, 'ports.json'), 'not json');
    const moved = await listenWithFallback({
      listen: fakeListener(new Set([41883])).listen,
      dataDir: dir,
      defaultPort: 41883,
    });
    expect(moved.fallback?.kind).toBe('moved');
    const denied = () => Promise.reject(Object.assign(new Error('denied'), { code: 'EACCES' }));
    await expect(listenWithFallback({ listen: denied, dataDir: dir, defaultPort: 41883 })).rejects.toThrow('denied');
  });

  it('the start banner says it loudly, with the URL to use and where it is remembered', () => {
    const service = {
      tlsCertificate: null,
      httpUrl: 'http://127.0.0.1:8080',
      mqttUrl: 'mqtt://127.0.0.1:40000',
      mqttsUrl: null,
      demo: null,
      database: { kind: 'embedded' as const },
    };
    const file = path.resolve('data/ports.json');
    const moved = startBanner({
      service: { ...service, mqttPortFallback: { kind: 'moved', port: 40_000, defaultPort: 1883, file } },
      dataDir: path.resolve('data'),
    });
    expect(moved).toContain(
      '!! MQTT: port 1883 was taken (another broker?), listening on mqtt://127.0.0.1:40000 instead.',
    );
    expect(moved).toContain('!! Remembered in data/ports.json: the next start uses port 40000 again.');
    const remembered = startBanner({
      service: { ...service, mqttPortFallback: { kind: 'remembered', port: 40_000, defaultPort: 1883, file } },
      dataDir: path.resolve('data'),
    });
    expect(remembered).toContain('!! MQTT: on port 40000, remembered in data/ports.json');
    expect(startBanner({ service: { ...service, mqttPortFallback: null }, dataDir: 'data' })).not.toContain('!!');
  });
});
