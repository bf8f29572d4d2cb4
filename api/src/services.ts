import type { ServiceDeps } from './domain/service-deps';
import { ApiKeyService } from './domain/accounts/api-key.service';
import { UserService } from './domain/accounts/user.service';
import { AccountService } from './domain/accounts/account.service';
import { IdempotencyService } from './domain/shared/idempotency.service';
import { ModelService } from './domain/models/model.service';
import { EventLogService } from './events/event-log.service';
import { WebhookService } from './domain/webhooks/webhook.service';
import { FleetReadService } from './domain/fleet/fleet-read.service';
import type { ServerSecret } from './domain/shared/server-secret';
import { DeviceGatewayRef } from './domain/devices/device-gateway';
import { DeviceService } from './domain/devices/device.service';
import { ClaimService } from './domain/devices/claim.service';
import { VersionOnlyClaimFirmwareScheduler } from './domain/devices/claim-firmware';
import { AllocationService } from './domain/accounts/allocation.service';
import { DeviceAuthService } from './domain/devices/device-auth.service';
import { PresenceService } from './domain/devices/presence.service';
import { DeviceConfigReportService } from './domain/devices/device-config-report';
import { OtaListenerRef } from './domain/devices/presence-listeners';
import { newId } from './domain/shared/ids';

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
  /** Recorded in `devices.broker_node` for devices connected to this process. Default: a random id. */
  brokerNodeId?: string;
}

export function createServices(deps: ServiceDeps, options: ServiceOptions = {}) {
  const apiKeys = new ApiKeyService(deps);
  const users = new UserService(deps);
  const accounts = new AccountService(deps, apiKeys);
  const idempotency = new IdempotencyService(deps);
  const models = new ModelService(deps);
  const events = new EventLogService(deps);
  const webhooks = new WebhookService(deps, { serverSecret: options.serverSecret, allowPrivate: options.webhookAllowPrivate });
  // Filled in by the broker when it starts (`services.gateway.set(...)`); a no-op until then.
  const gateway = new DeviceGatewayRef();
  const allocation = new AllocationService(deps);
  const fleet = new FleetReadService(deps, { allocation });
  const devices = new DeviceService(deps, { gateway });
  // The OTA engine replaces the scheduler with its deployment service (claims then schedule the firmware).
  const claims = new ClaimService(deps, { models, allocation, firmware: new VersionOnlyClaimFirmwareScheduler() });
  // Device gateway (broker): password checks, presence/heartbeat persistence, applied configuration.
  // The OTA engine registers itself with `otaListener.set(...)` to hear about devices.
  const deviceAuth = new DeviceAuthService(deps);
  const presence = new PresenceService(deps, options.brokerNodeId ?? newId());
  const configReports = new DeviceConfigReportService(deps);
  const otaListener = new OtaListenerRef();
  return { apiKeys, users, accounts, idempotency, models, events, webhooks, fleet, gateway, allocation, devices, claims, deviceAuth, presence, configReports, otaListener };
}

export type Services = ReturnType<typeof createServices>;
