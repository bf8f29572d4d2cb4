import { z } from 'zod';
import path from 'node:path';
import { isIP } from 'node:net';
import { parseSecretValue } from './shared/server-secret';

/** The MQTT port of a start without MQTT_PORT. */
export const DEFAULT_MQTT_PORT = 1883;

/**
 * Every setting of the service, parsed once from the environment at start.
 * Each field documents its default and unit; the README's configuration table mirrors this file.
 */
export const Config = z
  .object({
    /** HTTP port for the API, GraphQL, portal, downloads and MQTT over WebSocket. 0 = any free port. Default 8080. */
    port: z.coerce.number().int().min(0).max(65535).default(8080),
    /** MQTT (plain TCP) port for devices. 0 = any free port; `off` = no plain MQTT (TLS only). Default 1883. */
    mqttPort: z.union([z.literal('off'), z.coerce.number().int().min(0).max(65535)]).default(DEFAULT_MQTT_PORT),
    /** MQTT over TLS port, listening only when TLS_CERT_FILE and TLS_KEY_FILE are set. 0 = any free port. Default 8883. */
    mqttsPort: z.coerce.number().int().min(0).max(65535).default(8883),
    /**
     * PEM certificate (chain allowed) and private key of the service. Both set: HTTPS on PORT
     * (wss for GraphQL and MQTT over WebSocket) and MQTT over TLS on MQTTS_PORT; the files are
     * read again when they change. Neither set: plain HTTP and MQTT.
     */
    tlsCertFile: z.string().min(1).optional(),
    tlsKeyFile: z.string().min(1).optional(),
    /**
     * Which proxies' X-Forwarded-For / X-Forwarded-Proto are believed (Express's `trust proxy`):
     * `loopback` (default), `false`, a hop count, or comma-separated addresses and CIDR ranges of
     * a TLS-terminating load balancer.
     */
    trustProxy: z.string().min(1).refine(isTrustProxy).default('loopback'),
    /** Interface to bind both listeners to: an IP address or a host name (main.ts tries it before the start). Default 0.0.0.0. */
    host: z.string().min(1).refine(isHostSyntax).default('0.0.0.0'),
    /** PostgreSQL URL (postgres:// or postgresql://); unset means the embedded PGlite database in DATA_DIR. */
    databaseUrl: z
      .string()
      .refine((value) => hasProtocol(value, ['postgres:', 'postgresql:']))
      .optional(),
    /** Folder of the embedded database and the firmware files. Default ./data. */
    dataDir: z.string().min(1).default('./data'),
    /**
     * Where the embedded database (PGlite) runs: `worker`, a thread of its own, so no query,
     * flush or sweep blocks the event loop; `main`, the event loop's own thread. Default worker.
     */
    embeddedDatabaseThread: z.enum(['worker', 'main']).default('worker'),
    /**
     * How devices and browsers reach the HTTP port (download links). Default http://localhost:<port>.
     * At most 512 characters: a download link (this plus about 125) must fit the OTA command's
     * URL limit (protocol MAX_OTA_URL_LENGTH, 1024).
     */
    publicUrl: z
      .url({ protocol: /^https?$/ })
      .max(512)
      .optional(),
    /** Redis URL (redis:// or rediss://): enables cluster mode (shared broker state, rate limits, events). */
    redisUrl: z
      .string()
      .refine((value) => hasProtocol(value, ['redis:', 'rediss:']))
      .optional(),
    /** Prefix of every Redis key and channel, so several deployments (or test runs) can share one Redis. Default fleet. */
    redisKeyPrefix: z
      .string()
      .regex(/^[A-Za-z0-9:_-]{1,64}$/)
      .default('fleet'),
    /** pino log level. Default info. */
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    /** Allow webhook receivers on loopback and private networks (tests, demos). Default false. */
    webhookAllowPrivate: z
      .enum(['true', 'false', '1', '0'])
      .default('false')
      .transform((v) => v === 'true' || v === '1'),
    /**
     * Bearer token that /metrics requires (`Authorization: Bearer <token>`), at least 16
     * characters. Unset (the default): /metrics is open, for a scraper on a trusted network.
     */
    metricsToken: z.string().min(16, 'must be at least 16 characters').max(512).optional(),
    /** Create the demo account on the first start of an empty embedded database. Default true. */
    demoAccount: z
      .enum(['true', 'false', '1', '0'])
      .default('true')
      .transform((v) => v === 'true' || v === '1'),
    /** Largest JSON request body in bytes. Default 1 MiB. */
    maxJsonBodyBytes: z.coerce
      .number()
      .int()
      .positive()
      .default(1024 * 1024),
    /** Largest firmware binary in bytes. Default 256 MiB. */
    maxFirmwareBytes: z.coerce
      .number()
      .int()
      .positive()
      .default(256 * 1024 * 1024),
    /** Largest image (old or new) a delta is built for, in bytes; larger ones are sent whole. Default 32 MiB (docs/ota.md "Delta images"). */
    deltaMaxImageBytes: z.coerce
      .number()
      .int()
      .min(0)
      .default(32 * 1024 * 1024),
    /** OTA: a non-final update step without news for this long ends `timed_out`. Seconds, default 900. */
    otaStepTimeoutS: z.coerce.number().positive().default(900),
    /** OTA: after `succeeded`, time to come back on the target version (boot confirmation). Seconds, default 600. */
    otaBootTimeoutS: z.coerce.number().positive().default(600),
    /** OTA: an unanswered `sent` command is published again (same job id) after this long. Seconds, default 60. */
    otaResendAfterS: z.coerce.number().positive().default(60),
    /** OTA: lifetime of a signed firmware download link. Seconds, default 21600 (6 h). */
    otaLinkTtlS: z.coerce.number().positive().default(21600),
    /** OTA: safety sweep interval (deadlines, windows, scheduled starts). Milliseconds, default 5000. */
    otaSweepIntervalMs: z.coerce.number().int().min(0).default(5000),
    /** OTA: commands in the first dispatch transaction of a deployment; each next one doubles. Default 1000. */
    otaDispatchFirstPage: z.coerce.number().int().min(1).max(100_000).default(1000),
    /** OTA: most commands in one dispatch transaction. Default 10000. */
    otaDispatchMaxPage: z.coerce.number().int().min(1).max(100_000).default(10_000),
    /** Device history kept this many days; 0 keeps it forever. Default 365. */
    historyRetentionDays: z.coerce.number().min(0).max(36500).default(365),
    /** Dispatched events (and their webhook deliveries) kept this many days; 0 keeps them forever. Default 30. */
    eventRetentionDays: z.coerce.number().min(0).max(36500).default(30),
    /** Raw luminaire readings kept this many days (whole daily partitions dropped). Default 30. */
    luminaireRawRetentionDays: z.coerce.number().int().min(1).max(3650).default(30),
    /** Hourly luminaire roll-ups kept this many days (whole monthly partitions dropped). Default 365. */
    luminaireHourlyRetentionDays: z.coerce.number().int().min(31).max(36500).default(365),
    /**
     * The manufacturer's device CA (PEM certificate with CA:TRUE, and its unencrypted PEM private
     * key), which signs device certificates. Both or neither; unset: a CA created once and kept in
     * the database, its key sealed with the server secret.
     */
    deviceCaCertFile: z.string().min(1).optional(),
    deviceCaKeyFile: z.string().min(1).optional(),
    /** Validity of issued device certificates in days (never past the CA's own). Default 3650. */
    deviceCertDays: z.coerce.number().int().min(1).max(36500).default(3650),
  })
  .superRefine((config, ctx) => {
    // `params.pair`: the message is said as it is (loadConfig), with the value of the one that is set.
    if ((config.tlsCertFile === undefined) !== (config.tlsKeyFile === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: [config.tlsCertFile === undefined ? 'tlsKeyFile' : 'tlsCertFile'],
        message: 'TLS_CERT_FILE and TLS_KEY_FILE go together: set both or neither',
        params: { pair: true },
      });
    }
    if ((config.deviceCaCertFile === undefined) !== (config.deviceCaKeyFile === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: [config.deviceCaCertFile === undefined ? 'deviceCaKeyFile' : 'deviceCaCertFile'],
        message: 'DEVICE_CA_CERT_FILE and DEVICE_CA_KEY_FILE go together: set both or neither',
        params: { pair: true },
      });
    }
  });
export type Config = z.infer<typeof Config>;

/** The service's TLS files, when both are set. */
export function tlsFiles(config: Config): { certFile: string; keyFile: string } | null {
  return config.tlsCertFile && config.tlsKeyFile ? { certFile: config.tlsCertFile, keyFile: config.tlsKeyFile } : null;
}

type ConfigKey = keyof z.input<typeof Config>;

/** A setting as the environment names it, and what it allows (the second half of its error). */
export interface Setting {
  env: string;
  allowed: string;
}

const PORT_ALLOWED = 'a port number from 0 to 65535 (0 = any free port)';
const SECONDS_ALLOWED = 'a number of seconds greater than 0';
const BOOLEAN_ALLOWED = 'true, false, 1 or 0';
const RETENTION_ALLOWED = 'a number of days from 0 to 36500 (0 = keep forever)';

/**
 * Every field of Config by the environment variable that sets it and what it allows: loadConfig
 * reads the environment through this map, and turns each refusal of the schema into one line
 * that names the variable, its value (secrets masked) and what is allowed. The README's
 * configuration table lists the same variables (test/unit/config-errors.test.ts holds them together).
 */
export const SETTINGS: { readonly [K in ConfigKey]-?: Setting } = {
  port: { env: 'PORT', allowed: PORT_ALLOWED },
  mqttPort: { env: 'MQTT_PORT', allowed: `${PORT_ALLOWED}, or off (no plain MQTT)` },
  mqttsPort: { env: 'MQTTS_PORT', allowed: PORT_ALLOWED },
  tlsCertFile: { env: 'TLS_CERT_FILE', allowed: 'the path of a PEM certificate file' },
  tlsKeyFile: { env: 'TLS_KEY_FILE', allowed: 'the path of a PEM private key file' },
  trustProxy: {
    env: 'TRUST_PROXY',
    allowed: 'true, false, a hop count, or comma-separated IP addresses, CIDR ranges, loopback, linklocal, uniquelocal',
  },
  host: {
    env: 'HOST',
    allowed: 'an IP address or host name of this machine (0.0.0.0 or :: = every interface)',
  },
  databaseUrl: {
    env: 'DATABASE_URL',
    allowed: 'a PostgreSQL URL: postgres://user:password@host:5432/database (or postgresql://)',
  },
  dataDir: { env: 'DATA_DIR', allowed: 'the path of a folder' },
  embeddedDatabaseThread: { env: 'EMBEDDED_DATABASE_THREAD', allowed: 'worker or main' },
  publicUrl: { env: 'PUBLIC_URL', allowed: 'an http:// or https:// URL of at most 512 characters' },
  redisUrl: { env: 'REDIS_URL', allowed: 'a Redis URL: redis://host:6379 or rediss://host:6380' },
  redisKeyPrefix: { env: 'REDIS_KEY_PREFIX', allowed: '1 to 64 letters, digits, ":", "_" or "-"' },
  logLevel: { env: 'LOG_LEVEL', allowed: 'fatal, error, warn, info, debug, trace or silent' },
  webhookAllowPrivate: { env: 'WEBHOOK_ALLOW_PRIVATE', allowed: BOOLEAN_ALLOWED },
  metricsToken: { env: 'METRICS_TOKEN', allowed: '16 to 512 characters' },
  demoAccount: { env: 'DEMO_ACCOUNT', allowed: BOOLEAN_ALLOWED },
  maxJsonBodyBytes: { env: 'MAX_JSON_BODY_BYTES', allowed: 'a whole number of bytes, at least 1' },
  maxFirmwareBytes: { env: 'MAX_FIRMWARE_BYTES', allowed: 'a whole number of bytes, at least 1' },
  deltaMaxImageBytes: { env: 'DELTA_MAX_IMAGE_BYTES', allowed: 'a whole number of bytes (0 = no deltas)' },
  otaStepTimeoutS: { env: 'OTA_STEP_TIMEOUT_S', allowed: SECONDS_ALLOWED },
  otaBootTimeoutS: { env: 'OTA_BOOT_TIMEOUT_S', allowed: SECONDS_ALLOWED },
  otaResendAfterS: { env: 'OTA_RESEND_AFTER_S', allowed: SECONDS_ALLOWED },
  otaLinkTtlS: { env: 'OTA_LINK_TTL_S', allowed: SECONDS_ALLOWED },
  otaSweepIntervalMs: { env: 'OTA_SWEEP_INTERVAL_MS', allowed: 'a whole number of milliseconds (0 = no sweep)' },
  otaDispatchFirstPage: { env: 'OTA_DISPATCH_FIRST_PAGE', allowed: 'a whole number from 1 to 100000' },
  otaDispatchMaxPage: { env: 'OTA_DISPATCH_MAX_PAGE', allowed: 'a whole number from 1 to 100000' },
  historyRetentionDays: { env: 'HISTORY_RETENTION_DAYS', allowed: RETENTION_ALLOWED },
  eventRetentionDays: { env: 'EVENT_RETENTION_DAYS', allowed: RETENTION_ALLOWED },
  luminaireRawRetentionDays: { env: 'LUMINAIRE_RAW_RETENTION_DAYS', allowed: 'a whole number of days from 1 to 3650' },
  luminaireHourlyRetentionDays: {
    env: 'LUMINAIRE_HOURLY_RETENTION_DAYS',
    allowed: 'a whole number of days from 31 to 36500',
  },
  deviceCaCertFile: { env: 'DEVICE_CA_CERT_FILE', allowed: 'the path of a PEM CA certificate file' },
  deviceCaKeyFile: { env: 'DEVICE_CA_KEY_FILE', allowed: 'the path of an unencrypted PEM private key file' },
  deviceCertDays: { env: 'DEVICE_CERT_DAYS', allowed: 'a whole number of days from 1 to 36500' },
};

/** FLEET_SECRET is read by the server secret (core/shared/server-secret.ts); loadConfig checks it with the rest. */
const FLEET_SECRET_ALLOWED = '64 hex characters, 32 bytes in base64, or a passphrase of at least 32 characters';

/**
 * Settings the service cannot start with: one line per setting, `VARIABLE=value: what is allowed`.
 * main.ts prints the lines as they are (no log line, no stack trace) and exits with 1.
 */
export class ConfigurationError extends Error {
  readonly lines: readonly string[];

  constructor(lines: readonly string[]) {
    super(lines.join('\n'));
    this.name = 'ConfigurationError';
    this.lines = lines;
  }
}

/** One line of a ConfigurationError: the variable, its value as `showValue` shows it, and why. */
export function settingError(env: string, value: string, reason: string): string {
  return `${env}=${showValue(env, value)}: ${reason}`;
}

/**
 * A setting's value as an error may show it: a token, secret or password hidden whole (its
 * length kept, which is often the mistake), a URL's password and password-like query parameters
 * masked, control characters and spaces escaped, and long values cut.
 */
export function showValue(env: string, value: string): string {
  if (/TOKEN|SECRET|PASSWORD/i.test(env)) return `<hidden, ${value.length} characters>`;
  let shown = maskUrlSecrets(value);
  if (shown.length > 200) shown = `${shown.slice(0, 200)}...`;
  // eslint-disable-next-line no-control-regex
  return /[\u0000-\u0020\u007f-\u009f"]/.test(shown) || shown === '' ? JSON.stringify(shown) : shown;
}

/** `scheme://user:secret@host` → `scheme://user:***@host`, and `?password=…` (or token, secret) masked likewise. */
export function maskUrlSecrets(value: string): string {
  return value
    .replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/[^:/?#@\s]*:)(.*)@/, '$1***@')
    .replace(/([?&][^=&]*(?:pass|secret|token)[^=&]*=)[^&#]*/gi, '$1***');
}

/** Reads the documented environment variables; throws a ConfigurationError with one line per bad one. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const input = Object.fromEntries(
    Object.entries(SETTINGS).map(([key, setting]) => [key, env[setting.env] || undefined]),
  );
  const parsed = Config.safeParse(input);
  const lines: string[] = [];
  if (!parsed.success) {
    const reported = new Set<string>();
    for (const issue of parsed.error.issues) {
      const key = issue.path[0] as ConfigKey;
      const setting = SETTINGS[key];
      if (reported.has(key)) continue;
      reported.add(key);
      // The schema's own messages say what two settings need of each other; the others say what is allowed.
      const reason = issue.code === 'custom' && issue.params?.['pair'] ? issue.message : `expected ${setting.allowed}`;
      lines.push(settingError(setting.env, env[setting.env] ?? '', reason));
    }
  }
  if (env.FLEET_SECRET) {
    try {
      parseSecretValue(env.FLEET_SECRET);
    } catch {
      lines.push(settingError('FLEET_SECRET', env.FLEET_SECRET, `expected ${FLEET_SECRET_ALLOWED}`));
    }
  }
  if (!parsed.success || lines.length > 0) throw new ConfigurationError(lines);
  return { ...parsed.data, dataDir: path.resolve(parsed.data.dataDir) };
}

/**
 * Variables that make a start "configured". A start with none of them (`npm start` on a
 * newcomer's machine) moves MQTT to a free port when the default one is taken (another
 * Mosquitto, say) and remembers that port in DATA_DIR; a configured start never moves, so a
 * production install cannot drift to a port its devices do not know.
 */
export const CONFIGURED_BY = ['MQTT_PORT', 'DATABASE_URL', 'TLS_CERT_FILE', 'TLS_KEY_FILE', 'REDIS_URL'] as const;

/** What a zero-configuration start may do with a taken MQTT port. */
export interface PortFallback {
  /**
   * The port it tries first: 1883, or FLEET_DEFAULT_MQTT_PORT, which exists for tests only
   * (they play "1883 is taken" on a port they hold, never on 1883 itself).
   */
  defaultMqttPort: number;
}

/** The zero-configuration port fallback, or null for a configured start (see CONFIGURED_BY). */
export function portFallback(env: NodeJS.ProcessEnv = process.env): PortFallback | null {
  if (CONFIGURED_BY.some((name) => env[name])) return null;
  const override = env.FLEET_DEFAULT_MQTT_PORT;
  if (!override) return { defaultMqttPort: DEFAULT_MQTT_PORT };
  const port = Number(override);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new ConfigurationError([
      settingError('FLEET_DEFAULT_MQTT_PORT', override, 'expected a port number from 1 to 65535'),
    ]);
  return { defaultMqttPort: port };
}

function hasProtocol(value: string, protocols: readonly string[]): boolean {
  return URL.canParse(value) && protocols.includes(new URL(value).protocol);
}

/** An IP address, or a host name by RFC 1123 (underscores let container names through); `999.1.1.1` is neither. */
function isHostSyntax(host: string): boolean {
  if (isIP(host)) return true;
  if (/^[\d.]+$/.test(host)) return false;
  const label = '[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?';
  return host.length <= 253 && new RegExp(`^${label}(?:\\.${label})*\\.?$`).test(host);
}

/** TRUST_PROXY as Express's `trust proxy` takes it (api/src/http-server.ts trustProxySetting). */
function isTrustProxy(value: string): boolean {
  if (value === 'true' || value === 'false' || /^\d+$/.test(value)) return true;
  const parts = value
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean);
  return (
    parts.length > 0 &&
    parts.every((part) => ['loopback', 'linklocal', 'uniquelocal'].includes(part) || isIP(part) || isCidr(part))
  );
}

function isCidr(part: string): boolean {
  const [address = '', range, ...rest] = part.split('/');
  const family = isIP(address);
  if (!family || range === undefined || rest.length > 0) return false;
  if (/^\d+$/.test(range)) return Number(range) <= (family === 4 ? 32 : 128);
  return family === 4 && isIP(range) === 4;
}
