import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigurationError, SETTINGS, loadConfig, maskUrlSecrets } from '#core/config';
import { checkListenHost, listenFailure } from '#core/listen-errors';

const LONG_URL = `https://example.com/${'a'.repeat(600)}`;

/** The one line loadConfig gives for `env`, which must be refused. */
function refusal(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return [...(error as ConfigurationError).lines];
  }
  throw new Error(`accepted: ${JSON.stringify(env)}`);
}

/**
 * Issue 27 item 6: a bad setting fails with one line that names the environment variable, its
 * value (secrets masked) and what is allowed; never the schema's field name or zod's words.
 */
describe('configuration errors', () => {
  // [variable, bad value, what the line says is allowed, how the value shows]
  const cases: Array<[string, string, RegExp, string?]> = [
    ['PORT', 'abc', /expected a port number from 0 to 65535/],
    ['PORT', '70000', /expected a port number from 0 to 65535/],
    ['PORT', '80.5', /expected a port number/],
    ['PORT', '1 2', /expected a port number/, '"1 2"'],
    ['MQTT_PORT', 'x', /expected a port number from 0 to 65535 \(0 = any free port\), or off/],
    ['MQTT_PORT', '-1', /or off/],
    ['MQTTS_PORT', '65536', /expected a port number/],
    ['HOST', '999.1.1.1', /expected an IP address or host name of this machine/],
    ['HOST', 'bad host!', /expected an IP address or host name/, '"bad host!"'],
    ['DATABASE_URL', 'not-a-url', /expected a PostgreSQL URL: postgres:\/\//],
    ['DATABASE_URL', 'mysql://fleet@db/fleet', /expected a PostgreSQL URL/],
    ['PUBLIC_URL', 'ftp://files.example', /expected an http:\/\/ or https:\/\/ URL of at most 512 characters/],
    ['PUBLIC_URL', LONG_URL, /at most 512 characters/, `${LONG_URL.slice(0, 200)}...`],
    ['REDIS_URL', 'localhost:6379', /expected a Redis URL: redis:\/\//],
    ['REDIS_KEY_PREFIX', 'has space', /expected 1 to 64 letters, digits/, '"has space"'],
    ['TRUST_PROXY', 'foo', /expected true, false, a hop count, or comma-separated IP addresses, CIDR ranges/],
    ['TRUST_PROXY', '10.0.0.0/99', /CIDR ranges/],
    ['LOG_LEVEL', 'loud', /expected fatal, error, warn, info, debug, trace or silent/],
    ['WEBHOOK_ALLOW_PRIVATE', 'yes', /expected true, false, 1 or 0/],
    ['DEMO_ACCOUNT', 'no', /expected true, false, 1 or 0/],
    ['MAX_JSON_BODY_BYTES', '0', /expected a whole number of bytes, at least 1/],
    ['MAX_FIRMWARE_BYTES', '1MB', /expected a whole number of bytes/],
    ['OTA_STEP_TIMEOUT_S', '-5', /expected a number of seconds greater than 0/],
    ['OTA_BOOT_TIMEOUT_S', 'soon', /seconds greater than 0/],
    ['OTA_RESEND_AFTER_S', '0', /seconds greater than 0/],
    ['OTA_LINK_TTL_S', 'NaN', /seconds greater than 0/],
    ['OTA_SWEEP_INTERVAL_MS', '1.5', /expected a whole number of milliseconds \(0 = no sweep\)/],
    ['OTA_DISPATCH_FIRST_PAGE', '0', /expected a whole number from 1 to 100000/],
    ['OTA_DISPATCH_MAX_PAGE', '100001', /expected a whole number from 1 to 100000/],
    ['HISTORY_RETENTION_DAYS', '-1', /expected a number of days from 0 to 36500 \(0 = keep forever\)/],
    ['EVENT_RETENTION_DAYS', '40000', /days from 0 to 36500/],
    ['DEVICE_CERT_DAYS', '0', /expected a whole number of days from 1 to 36500/],
    [
      'DEVICE_CA_CERT_FILE',
      '/etc/ca.pem',
      /DEVICE_CA_CERT_FILE and DEVICE_CA_KEY_FILE go together: set both or neither/,
    ],
    ['DEVICE_CA_KEY_FILE', '/etc/ca.key', /DEVICE_CA_CERT_FILE and DEVICE_CA_KEY_FILE go together/],
    ['TLS_CERT_FILE', 'server.pem', /TLS_CERT_FILE and TLS_KEY_FILE go together: set both or neither/],
    ['TLS_KEY_FILE', 'server.key', /TLS_CERT_FILE and TLS_KEY_FILE go together/],
  ];

  it.each(cases)(
    '%s=%.40s: one line with the variable, the value and what is allowed',
    (name, value, allowed, shown) => {
      const lines = refusal({ [name]: value });
      expect(lines).toHaveLength(1);
      const line = lines[0]!;
      expect(line.startsWith(`${name}=${shown ?? value}: `)).toBe(true);
      expect(line).toMatch(allowed);
      expect(line).not.toContain('\n');
      // Never the schema's own words or field names.
      expect(line).not.toMatch(/Invalid input|received NaN|mqttPort|otaStep|\bport:/);
    },
  );

  it('masks secrets: tokens and the server secret whole, the password of a URL, password-like URL parameters', () => {
    expect(refusal({ METRICS_TOKEN: 'short-secret' })).toEqual([
      'METRICS_TOKEN=<hidden, 12 characters>: expected 16 to 512 characters',
    ]);
    expect(refusal({ FLEET_SECRET: 'too-short-passphrase' })).toEqual([
      'FLEET_SECRET=<hidden, 20 characters>: expected 64 hex characters, 32 bytes in base64, or a passphrase of at least 32 characters',
    ]);
    const [db] = refusal({ DATABASE_URL: 'mysql://fleet:hunter2@db:3306/fleet?sslpassword=s3cret&x=1' });
    expect(db).toBe(
      'DATABASE_URL=mysql://fleet:***@db:3306/fleet?sslpassword=***&x=1: expected a PostgreSQL URL: postgres://user:password@host:5432/database (or postgresql://)',
    );
    const [redis] = refusal({ REDIS_URL: 'http://:redis-pass@cache:6379' });
    expect(redis).not.toContain('redis-pass');
    expect(maskUrlSecrets('postgres://u:p@ss:w@rd@h/db')).toBe('postgres://u:***@h/db');
    expect(maskUrlSecrets('postgres://u@h/db?x=a@b')).toBe('postgres://u@h/db?x=a@b');
  });

  it('lists every bad setting, one line each, and accepts what the README documents', () => {
    expect(refusal({ PORT: 'abc', MQTT_PORT: 'x', HOST: '999.1.1.1', LOG_LEVEL: 'loud' })).toEqual([
      expect.stringMatching(/^PORT=abc: /),
      expect.stringMatching(/^MQTT_PORT=x: /),
      expect.stringMatching(/^HOST=999\.1\.1\.1: /),
      expect.stringMatching(/^LOG_LEVEL=loud: /),
    ]);
    const good = loadConfig({
      HOST: 'localhost',
      DATABASE_URL: 'postgresql://fleet:secret@db.internal:5432/fleet',
      PUBLIC_URL: 'https://fleet.example.com',
      REDIS_URL: 'rediss://:pw@cache:6380',
      TRUST_PROXY: '10.0.0.0/8, 192.168.1.7, loopback, 10.1.0.0/255.255.0.0',
      MQTT_PORT: 'off',
      FLEET_SECRET: 'a'.repeat(64),
    });
    expect(good).toMatchObject({ host: 'localhost', mqttPort: 'off', trustProxy: expect.any(String) });
    for (const host of ['0.0.0.0', '::', '::1', '127.0.0.1', 'fleet-1.internal', 'fleet_api']) {
      expect(loadConfig({ HOST: host }).host).toBe(host);
    }
    expect(loadConfig({ DATABASE_URL: 'postgres:///fleet?host=/var/run/postgresql' }).databaseUrl).toBeDefined();
  });

  it('the README configuration table lists exactly the variables the service reads', () => {
    const readme = readFileSync('README.md', 'utf8');
    const section = readme.slice(
      readme.indexOf('## Configuration'),
      readme.indexOf('\n## ', readme.indexOf('## Configuration') + 5),
    );
    const documented = new Set(
      section
        .split('\n')
        .filter((line) => line.startsWith('| `'))
        .flatMap((line) => [...line.split('|')[1]!.matchAll(/`([A-Z0-9_]+)`/g)].map((m) => m[1]!)),
    );
    const read = new Set([...Object.values(SETTINGS).map((s) => s.env), 'FLEET_SECRET', 'NODE_ENV']);
    expect([...documented].sort()).toEqual([...read].sort());
  });
});

describe('listen failures name the setting', () => {
  const at = { what: 'HTTP', port: 8080, host: 'fleet.invalid', setting: 'PORT' };
  const failure = (code: string) => listenFailure(Object.assign(new Error(`listen ${code}`), { code }), at);

  it('a taken port names its port variable and keeps EADDRINUSE; a bad HOST names HOST', () => {
    const taken = failure('EADDRINUSE');
    expect(taken.message).toBe(
      'HTTP port 8080 on fleet.invalid is already in use. Set PORT to a free port (0 picks any).',
    );
    expect((taken as NodeJS.ErrnoException).code).toBe('EADDRINUSE');
    expect(failure('ENOTFOUND').message).toBe(
      'HOST=fleet.invalid: the name does not resolve (ENOTFOUND); expected an IP address or host name of this machine (0.0.0.0 or :: = every interface)',
    );
    expect(failure('EAI_AGAIN').message).toMatch(/^HOST=fleet\.invalid: the name does not resolve \(EAI_AGAIN\)/);
    expect(failure('EADDRNOTAVAIL').message).toMatch(/^HOST=fleet\.invalid: not an address of this machine/);
    expect(failure('EACCES').message).toMatch(/^PORT=8080: this process may not listen on port 8080/);
    expect(failure('EMFILE').message).toBe('listen EMFILE');
  });

  it('HOST is tried before the start: an address of no interface here fails with one line naming HOST', async () => {
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine.
    await expect(checkListenHost('192.0.2.1')).rejects.toThrow(
      /^HOST=192\.0\.2\.1: not an address of this machine \(EADDRNOTAVAIL\); expected an IP address or host name/,
    );
    await expect(checkListenHost('127.0.0.1')).resolves.toBeUndefined();
  });
});
