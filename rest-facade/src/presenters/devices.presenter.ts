import type { Device, DeviceHistoryEntry } from '#core/devices/device-types';
import type { ClaimResult } from '#core/devices/claim.service';
import { fromMinor } from '#core/accounts/money';
import { presentCertificate } from './certificates.presenter';
import { presentAllocation } from './allocation.presenter';
import type { CredentialRotationView } from '#core/devices/credential-rotation.service';

/**
 * Domain device -> wire format (snake_case, fields in the spec's order first). Lists render the
 * same document in SQL (devices/store/device-list.store.ts selectDeviceJsonPage); devices-list.test.ts keeps
 * the two equal.
 */
export function presentDevice(d: Device) {
  return {
    serial: d.serial,
    name: d.name,
    model: d.model,
    firmware: d.firmware,
    status: d.status,
    last_seen: d.lastSeen,
    ip: d.ip,
    connectivity: d.connectivity,
    update:
      d.update === null
        ? null
        : {
            job_id: d.update.jobId,
            deployment_id: d.update.deploymentId,
            state: d.update.state,
            progress: d.update.progress,
            from_version: d.update.fromVersion,
            target_version: d.update.targetVersion,
            error: d.update.error,
            state_changed_at: d.update.stateChangedAt,
          },
    tags: d.tags,
    config: {
      desired: d.config.desired,
      desired_version: d.config.desiredVersion,
      reported: d.config.reported,
      reported_version: d.config.reportedVersion,
      in_sync: d.config.inSync,
    },
    uptime_s: d.uptimeS,
    rssi: d.rssi,
    claimed_at: d.claimedAt,
    firmware_reported_invalid: d.firmwareReportedInvalid,
    refused_messages: d.refusedMessages,
    last_refused_message: d.lastRefusedMessage,
    refused_fields: d.refusedFields,
    site: d.site === null ? null : { id: d.site.id, name: d.site.name },
  };
}

export function presentClaim(result: ClaimResult) {
  return {
    claimed: result.claimed,
    devices: result.devices.map(({ device, credentials, certificate }) => ({
      ...presentDevice(device),
      credentials: { username: credentials.username, password: credentials.password },
      ...(certificate ? { certificate: presentCertificate(certificate) } : {}),
    })),
    deployment_id: result.deploymentId,
    charged: { amount: fromMinor(result.charged.amountMinor), currency: result.charged.currency },
    allocation: presentAllocation(result.allocation),
  };
}

export function presentHistory(page: { events: DeviceHistoryEntry[]; nextCursor: string | null }) {
  return {
    events: page.events.map((e) => ({ id: e.id, type: e.type, occurred_at: e.occurredAt, data: e.data })),
    next_cursor: page.nextCursor,
  };
}

/** A planned credential rotation (202): never the secret. */
export function presentRotation(r: CredentialRotationView) {
  return {
    serial: r.serial,
    username: r.username,
    mode: 'in_band' as const,
    rotation: {
      id: r.id,
      kind: r.kind,
      state: r.state,
      created_at: r.createdAt,
      grace_ends_at: r.graceEndsAt,
    },
  };
}
