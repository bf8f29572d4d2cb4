import { z } from 'zod';
import path from 'node:path';

/**
 * Every setting of the service, parsed once from the environment at start.
 * Each field documents its default and unit; the README's configuration table mirrors this file.
 */
export const Config = z
  .object({
    /** HTTP port for the API, GraphQL, portal, downloads and MQTT over WebSocket. 0 = any free port. Default 8080. */
    port: z.coerce.number().int().min(0).max(65535).default(8080),
    /** MQTT (plain TCP) port for devices. 0 = any free port; `off` = no plain MQTT (TLS only). Default 1883. */
    mqttPort: z.union([z.literal('off'), z.coerce.number().int().min(0).max(65535)]).default(1883),
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
    trustProxy: z.string().min(1).default('loopback'),
    /** Interface to bind both listeners to. Default 0.0.0.0. */
    host: z.string().min(1).default('0.0.0.0'),
    /** PostgreSQL connection string; unset means the embedded PGlite database in DATA_DIR. */
    databaseUrl: z.string().min(1).optional(),
    /** Folder of the embedded database and the firmware files. Default ./data. */
    dataDir: z.string().min(1).default('./data'),
    /** How devices and browsers reach the HTTP port (download links). Default http://localhost:<port>. */
    publicUrl: z.url().optional(),
    /** Redis connection string: enables cluster mode (shared broker state, rate limits, events). */
    redisUrl: z.string().min(1).optional(),
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
    if ((config.deviceCaCertFile === undefined) !== (config.deviceCaKeyFile === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['deviceCaCertFile'],
        message: 'DEVICE_CA_CERT_FILE and DEVICE_CA_KEY_FILE go together: set both or neither',
      });
    }
  });
export type Config = z.infer<typeof Config>;

/** The service's TLS files, when both are set. */
export function tlsFiles(config: Config): { certFile: string; keyFile: string } | null {
  return config.tlsCertFile && config.tlsKeyFile ? { certFile: config.tlsCertFile, keyFile: config.tlsKeyFile } : null;
}

/** Reads the documented environment variables; throws a readable error listing every bad one. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = Config.safeParse({
    port: env.PORT || undefined,
    mqttPort: env.MQTT_PORT || undefined,
    mqttsPort: env.MQTTS_PORT || undefined,
    tlsCertFile: env.TLS_CERT_FILE || undefined,
    tlsKeyFile: env.TLS_KEY_FILE || undefined,
    trustProxy: env.TRUST_PROXY || undefined,
    host: env.HOST || undefined,
    databaseUrl: env.DATABASE_URL || undefined,
    dataDir: env.DATA_DIR || undefined,
    publicUrl: env.PUBLIC_URL || undefined,
    redisUrl: env.REDIS_URL || undefined,
    redisKeyPrefix: env.REDIS_KEY_PREFIX || undefined,
    logLevel: env.LOG_LEVEL || undefined,
    webhookAllowPrivate: env.WEBHOOK_ALLOW_PRIVATE || undefined,
    metricsToken: env.METRICS_TOKEN || undefined,
    demoAccount: env.DEMO_ACCOUNT || undefined,
    maxJsonBodyBytes: env.MAX_JSON_BODY_BYTES || undefined,
    maxFirmwareBytes: env.MAX_FIRMWARE_BYTES || undefined,
    otaStepTimeoutS: env.OTA_STEP_TIMEOUT_S || undefined,
    otaBootTimeoutS: env.OTA_BOOT_TIMEOUT_S || undefined,
    otaResendAfterS: env.OTA_RESEND_AFTER_S || undefined,
    otaLinkTtlS: env.OTA_LINK_TTL_S || undefined,
    otaSweepIntervalMs: env.OTA_SWEEP_INTERVAL_MS || undefined,
    otaDispatchFirstPage: env.OTA_DISPATCH_FIRST_PAGE || undefined,
    otaDispatchMaxPage: env.OTA_DISPATCH_MAX_PAGE || undefined,
    historyRetentionDays: env.HISTORY_RETENTION_DAYS || undefined,
    eventRetentionDays: env.EVENT_RETENTION_DAYS || undefined,
    deviceCaCertFile: env.DEVICE_CA_CERT_FILE || undefined,
    deviceCaKeyFile: env.DEVICE_CA_KEY_FILE || undefined,
    deviceCertDays: env.DEVICE_CERT_DAYS || undefined,
  });
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`);
  }
  if (Boolean(parsed.data.tlsCertFile) !== Boolean(parsed.data.tlsKeyFile)) {
    throw new Error('Invalid configuration:\n  TLS_CERT_FILE and TLS_KEY_FILE must be set together (or neither).');
  }
  return { ...parsed.data, dataDir: path.resolve(parsed.data.dataDir) };
}
