import type { ServiceDeps } from './service-deps';
import { ApiKeyService } from './accounts/api-key.service';
import { UserService } from './accounts/user.service';
import { AccountService } from './accounts/account.service';
import { IdempotencyService } from './shared/idempotency.service';
import { ModelService } from './models/model.service';
import { EventLogService } from './events/event-log.service';
import { WebhookService } from './webhooks/webhook.service';
import type { HostResolver } from './webhooks/url-guard';
import { FleetReadService } from './fleet/fleet-read.service';
import { ServerSecret } from './shared/server-secret';
import { NO_BROKER, type DeviceGateway } from './devices/device-gateway';
import { DeviceService } from './devices/device.service';
import { ClaimService } from './devices/claim.service';
import { AllocationService } from './accounts/allocation.service';
import { DeviceAuthService } from './devices/device-auth.service';
import { DesiredConfigs } from './devices/desired-configs';
import { CredentialRotationService } from './devices/credential-rotation.service';
import { PresenceService } from './devices/presence.service';
import { newId } from './shared/ids';
import { FirmwareStorage } from './firmware/firmware-storage';
import { FirmwareDownloads } from './firmware/firmware-downloads';
import { FirmwareService } from './firmware/firmware.service';
import { SigningKeyService } from './firmware/signing-key.service';
import { DownloadLinkSigner } from './firmware/download-links';
import { DeltaCache, type DeltaCacheOptions } from './firmware/delta/delta-cache';
import { UpdateLockService } from './deployments/update-lock.service';
import { DeploymentService } from './deployments/deployment.service';
import { OtaEngine, type OtaEngineOptions, type OtaMetrics } from './deployments/ota-engine';
import { RetentionService, DEFAULT_RETENTION, type RetentionPolicy } from './housekeeping/retention.service';
import { randomBytes } from 'node:crypto';
import { DeviceCa, type DeviceCaFiles } from './certificates/device-ca';
import { DeviceCertificateService } from './certificates/device-certificate.service';
import { LuminaireService } from './luminaire/luminaire.service';
import { HealthService } from './health/health.service';
import { WarrantyService, type WarrantyPolicy } from './health/warranty';
import { FixtureGateService } from './deployments/fixture-gate.service';
import { LuminaireLive, type LuminaireLiveFeed } from './luminaire/luminaire-live';
import { LuminairePartitions, type LuminaireRetention } from './luminaire/luminaire-partitions';
import { SiteService } from './sites/site.service';

/**
 * The one set of domain services. REST routes, GraphQL resolvers and MQTT handlers are thin
 * adapters over these; each area adds its services here.
 */
/** Process-level settings some services need (app.ts passes them; tools may omit them). */
export interface ServiceOptions {
  /** Seals webhook secrets (and signs download links); see domain/shared/server-secret.ts. */
  serverSecret?: ServerSecret;
  /** WEBHOOK_ALLOW_PRIVATE. */
  webhookAllowPrivate?: boolean;
  /** DNS for the creation check of webhook receiver names. Default: the system resolver. */
  webhookResolveHost?: HostResolver;
  /** Recorded in `devices.broker_node` for devices connected to this process. Default: a random id. */
  brokerNodeId?: string;
  /** Firmware files and the OTA engine (DATA_DIR, MAX_FIRMWARE_BYTES, OTA_* settings). */
  firmware?: {
    dataDir: string;
    maxFirmwareBytes: number;
    engine?: Partial<OtaEngineOptions>;
    metrics?: OtaMetrics;
    /** Delta images: DELTA_MAX_IMAGE_BYTES, and the build function in tests. */
    deltas?: DeltaCacheOptions;
  };
  /** HISTORY_RETENTION_DAYS, EVENT_RETENTION_DAYS. */
  retention?: RetentionPolicy;
  /**
   * Device CA and certificates: `caFiles` (DEVICE_CA_CERT_FILE, DEVICE_CA_KEY_FILE) is the
   * manufacturer's CA; without it one is created once in the database. `days`: DEVICE_CERT_DAYS.
   */
  deviceCertificates?: { caFiles?: DeviceCaFiles | undefined; days?: number | undefined };
  /** How services reach devices: the broker (app.ts builds it first). Default: none (tools). */
  gateway?: DeviceGateway;
  /** LUMINAIRE_RAW_RETENTION_DAYS, LUMINAIRE_HOURLY_RETENTION_DAYS. */
  luminaireRetention?: LuminaireRetention;
  /** Live luminaire readings; in cluster mode the Redis-backed one (app.ts). Default: this process only. */
  luminaireLive?: LuminaireLiveFeed;
  /** How long an unclaimed device's warranty evidence is kept for its owner (default 5 years). */
  warranty?: WarrantyPolicy;
}

export function createServices(deps: ServiceDeps, options: ServiceOptions = {}) {
  const apiKeys = new ApiKeyService(deps);
  const users = new UserService(deps);
  const accounts = new AccountService(deps, apiKeys);
  const idempotency = new IdempotencyService(deps, options.serverSecret);
  const models = new ModelService(deps);
  const events = new EventLogService(deps);
  const webhooks = new WebhookService(deps, {
    serverSecret: options.serverSecret,
    allowPrivate: options.webhookAllowPrivate,
    resolveHost: options.webhookResolveHost,
  });
  const gateway = options.gateway ?? NO_BROKER;
  const allocation = new AllocationService(deps);
  const fleet = new FleetReadService(deps, { allocation });
  // Warranty evidence outlives an unclaim (core/health/warranty.ts): the unclaim hands it over.
  const warranty = new WarrantyService(deps, options.warranty);
  // Device certificates (mutual TLS): the CA is loaded or created once per process (app.ts loads it at start).
  const deviceCa = new DeviceCa(deps, {
    serverSecret: options.serverSecret,
    files: options.deviceCertificates?.caFiles,
  });
  const certificates = new DeviceCertificateService(deps, {
    ca: deviceCa,
    gateway,
    certificateDays: options.deviceCertificates?.days,
  });
  // Firmware versions, deployments and the OTA engine. Download links are signed with
  // the server secret's purpose key; without one (tools that never serve downloads) a random key.
  const firmwareStorage = new FirmwareStorage(options.firmware?.dataDir ?? './data');
  const signingKeys = new SigningKeyService(deps);
  const firmware = new FirmwareService(deps, {
    models,
    storage: firmwareStorage,
    signingKeys,
    maxFirmwareBytes: options.firmware?.maxFirmwareBytes ?? 256 * 1024 * 1024,
  });
  const downloadLinks = new DownloadLinkSigner(options.serverSecret?.key('firmware-downloads') ?? randomBytes(32));
  const firmwareDownloads = new FirmwareDownloads(deps, { links: downloadLinks });
  const nodeId = options.brokerNodeId ?? newId();
  // Delta images of deployments, cached in firmware storage for the whole cluster.
  const deltas = new DeltaCache(deps, { storage: firmwareStorage, options: options.firmware?.deltas ?? {} });
  const ota = new OtaEngine(deps, {
    gateway,
    links: downloadLinks,
    deltas,
    nodeId,
    warmFirmware: (key, size) => firmwareStorage.warm(key, size),
    ...(options.firmware?.engine ? { options: options.firmware.engine } : {}),
    ...(options.firmware?.metrics ? { metrics: options.firmware.metrics } : {}),
  });
  const deployments = new DeploymentService(deps, { models, engine: ota, deltas });
  const devices = new DeviceService(deps, { gateway, warranty, deployments: ota });
  // Claims schedule their firmware through the deployment service (a deployment of kind `claim`).
  const claims = new ClaimService(deps, {
    models,
    allocation,
    firmware: deployments,
    certificates,
    onClaimed: (accountId) => devices.forgetCounts(accountId),
  });
  // What the broker serves devices with: password checks, presence (the OTA engine hears about devices too).
  const deviceAuth = new DeviceAuthService(deps, { ca: deviceCa });
  // The configuration a device is sent once on each connection.
  const desiredConfigs = new DesiredConfigs(deps);
  // Planned rotations: a pending password is sealed with the server secret until the device
  // confirms it; tools without one (they deliver nothing) seal with a key of their own.
  const rotations = new CredentialRotationService(deps, {
    gateway,
    certificates,
    secrets: options.serverSecret ?? new ServerSecret(randomBytes(32)),
  });
  const presence = new PresenceService(deps, nodeId);
  const sites = new SiteService(deps);
  // Device update locks: what operators read of them, and the emergency-lighting flags.
  const updateLocks = new UpdateLockService(deps);
  const retention = new RetentionService(deps, options.retention ?? DEFAULT_RETENTION);
  // Luminaire data: series, summaries and fleet energy; the time partitions its tables live in.
  const luminaireLive: LuminaireLiveFeed = options.luminaireLive ?? new LuminaireLive();
  const luminaire = new LuminaireService(deps, { devices, live: luminaireLive });
  const luminairePartitions = new LuminairePartitions(deps, options.luminaireRetention);
  // Fixture health, and the rollout gate's fixture signals judged from the same roll-ups.
  const health = new HealthService(deps);
  const fixtureGate = new FixtureGateService(deps, { health });
  return {
    health,
    fixtureGate,
    warranty,
    luminaire,
    luminairePartitions,
    luminaireLive,
    deviceCa,
    certificates,
    retention,
    apiKeys,
    users,
    accounts,
    idempotency,
    models,
    events,
    webhooks,
    fleet,
    gateway,
    allocation,
    devices,
    claims,
    deviceAuth,
    desiredConfigs,
    rotations,
    presence,
    firmware,
    signingKeys,
    firmwareStorage,
    firmwareDownloads,
    downloadLinks,
    deltas,
    deployments,
    ota,
    sites,
    updateLocks,
  };
}

export type Services = ReturnType<typeof createServices>;
