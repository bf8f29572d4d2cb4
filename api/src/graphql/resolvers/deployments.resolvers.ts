import { DomainError } from '#core/shared/errors';
import { allowedActions, isActive } from '#core/deployments/deployment-types';
import { DEVICE_STATUSES } from '#core/devices/device-types';
import { progressPercent } from '#core/deployments/progress-rules';
import type { DeployInput } from '#core/deployments/deployment.service';
import type { DeployFirmwareInput, Resolvers } from '../generated/resolvers-types';
import { MAX_PAGE } from '../limits';
import { connection, liveField, oneOf, orDefault, orNull } from './presenters';
import { fixtureRolloutInput } from './health.resolvers';

/** GraphQL's deploy input to the service's DeployInput (both camelCase; GraphQL's nulls mean "not given"). */
export function toDeployInput(input: DeployFirmwareInput): DeployInput {
  const f = input.filter;
  const r = input.rollout;
  return {
    firmwareVersion: input.firmwareVersion,
    filter: {
      ...(f.model != null ? { model: f.model } : {}),
      ...(f.firmwareLt != null ? { firmwareLt: f.firmwareLt } : {}),
      ...(f.status != null ? { status: f.status } : {}),
      ...(f.serials != null ? { serials: f.serials } : {}),
      ...(f.site != null ? { site: f.site } : {}),
    },
    ...(r
      ? {
          rollout: {
            ...(r.batches != null ? { batches: r.batches } : {}),
            ...(r.failureThresholdPercent != null ? { failureThresholdPercent: r.failureThresholdPercent } : {}),
            ...(r.minBatchSuccessPercent != null ? { minBatchSuccessPercent: r.minBatchSuccessPercent } : {}),
            ...(r.maxConcurrentPerTag != null ? { maxConcurrentPerTag: r.maxConcurrentPerTag } : {}),
            ...(r.healthWindowMinutes != null ? { healthWindowMinutes: r.healthWindowMinutes } : {}),
            ...(r.healthMaxReconnects != null ? { healthMaxReconnects: r.healthMaxReconnects } : {}),
            ...fixtureRolloutInput(r),
          },
        }
      : {}),
    ...(input.respectMaintenanceWindow != null ? { respectMaintenanceWindow: input.respectMaintenanceWindow } : {}),
    ...(input.scheduledAt != null ? { scheduledAt: input.scheduledAt } : {}),
  };
}

export const deploymentResolvers: Resolvers = {
  Query: {
    deployments: async (_, args, ctx) => {
      const page = await ctx.services.deployments.list(ctx.actor, {
        limit: orDefault(args.first, 20),
        ...(args.after ? { cursor: args.after } : {}),
        ...(args.status ? { status: args.status } : {}),
      });
      return connection(page.deployments, (_d, i) => page.cursors[i]!, page.nextCursor, { totalCount: null });
    },
    deployment: (_, args, ctx) => orNull(ctx.services.deployments.get(ctx.actor, { id: args.id })),
    deployPreview: (_, args, ctx) => ctx.services.deployments.preview(ctx.actor, toDeployInput(args.input)),
  },
  Mutation: {
    deployFirmware: (_, args, ctx) => ctx.services.deployments.deploy(ctx.actor, toDeployInput(args.input)),
    cancelDeployment: (_, args, ctx) => ctx.services.deployments.cancel(ctx.actor, { id: args.id }),
    pauseDeployment: (_, args, ctx) => ctx.services.deployments.pause(ctx.actor, { id: args.id }),
    resumeDeployment: (_, args, ctx) => ctx.services.deployments.resume(ctx.actor, { id: args.id }),
    rollbackDeployment: (_, args, ctx) => ctx.services.deployments.rollback(ctx.actor, { id: args.id }),
    retryFailedDeployment: (_, args, ctx) => ctx.services.deployments.retryFailed(ctx.actor, { id: args.id }),
  },
  Deployment: {
    filter: (d) => ({
      model: d.filter.model ?? null,
      firmwareLt: d.filter.firmware_lt ?? null,
      // Stored as text; deploy only accepts device statuses.
      status: d.filter.status !== undefined ? oneOf(DEVICE_STATUSES, d.filter.status, 'Filter status') : null,
      serials: d.filter.serials ?? null,
      site: d.filter.site ?? null,
    }),
    counts: (d) => ({
      ...d.counts,
      timedOut: d.counts.timed_out,
      rolledBack: d.counts.rolled_back,
      healthFailed: d.counts.health_failed,
      noUpgradePath: d.counts.no_upgrade_path,
    }),
    progress: (d) => progressPercent(d),
    active: (d) => isActive(d.status),
    allowedActions: (d) => allowedActions(d.status),
    updates: async (d, args, ctx) => {
      const first = orDefault(args.first, 50);
      if (first < 1 || first > MAX_PAGE)
        throw new DomainError('validation_failed', `first must be 1 to ${MAX_PAGE}.`, {
          errors: [{ field: 'first', message: `must be 1 to ${MAX_PAGE}` }],
        });
      const page = await ctx.services.deployments.devices(ctx.actor, {
        id: d.id,
        limit: first,
        ...(args.after ? { cursor: args.after } : {}),
        ...(args.state ? { state: args.state } : {}),
      });
      // Every update state, superseded included, is counted per deployment.
      const totalCount = args.state ? d.counts[args.state] : d.targetCount;
      return connection(
        page.devices.map((u) => ({ ...u, deploymentId: d.id })),
        (_u, i) => page.cursors[i]!,
        page.nextCursor,
        { totalCount },
      );
    },
  },
  Rollout: {
    // `steps` is the deprecated name of `batches`, still answered for older clients.
    steps: (r) => r.batches,
    failureThresholdPercent: (r) => r.failure_threshold_percent ?? null,
    minBatchSuccessPercent: (r) => r.min_batch_success_percent,
    maxConcurrentPerTag: (r) => r.max_concurrent_per_tag ?? null,
    healthWindowMinutes: (r) => r.health_window_minutes,
    healthMaxReconnects: (r) => r.health_max_reconnects,
  },
  Subscription: {
    deploymentProgress: liveField(
      (_, args, ctx) => ctx.live.deploymentProgress(ctx.actor, args.id),
      (deployment) => deployment,
    ),
  },
};
