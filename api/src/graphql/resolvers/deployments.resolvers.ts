import type { GraphQLContext } from '../context';
import { DomainError } from '../../domain/shared/errors';
import type { Deployment, DeviceUpdateView, Rollout } from '../../domain/deployments/deployment-types';
import { progressPercent } from '../../domain/deployments/progress-rules';
import type { DeployInput } from '../../domain/deployments/deployment.service';
import { cursorCodec } from '../../domain/deployments/deployment-inputs';
import { MAX_PAGE } from '../limits';
import { connection } from './presenters';

interface DeployArgs {
  firmwareVersion: string;
  filter: {
    model?: string | null;
    firmwareLt?: string | null;
    status?: 'online' | 'offline' | 'updating' | null;
    serials?: string[] | null;
  };
  rollout?: {
    batches?: number[] | null;
    failureThresholdPercent?: number | null;
    minBatchSuccessPercent?: number | null;
    maxConcurrentPerTag?: { tag: string; max: number } | null;
    healthWindowMinutes?: number | null;
    healthMaxReconnects?: number | null;
  } | null;
  respectMaintenanceWindow?: boolean | null;
  scheduledAt?: string | null;
}

/** GraphQL's camelCase deploy input to the service's (REST-shaped, snake_case) DeployInput. */
export function toDeployInput(input: DeployArgs): DeployInput {
  const f = input.filter ?? {};
  const r = input.rollout;
  return {
    firmware_version: input.firmwareVersion,
    filter: {
      ...(f.model != null ? { model: f.model } : {}),
      ...(f.firmwareLt != null ? { firmware_lt: f.firmwareLt } : {}),
      ...(f.status != null ? { status: f.status } : {}),
      ...(f.serials != null ? { serials: f.serials } : {}),
    },
    ...(r
      ? {
          rollout: {
            ...(r.batches != null ? { batches: r.batches } : {}),
            ...(r.failureThresholdPercent != null ? { failure_threshold_percent: r.failureThresholdPercent } : {}),
            ...(r.minBatchSuccessPercent != null ? { min_batch_success_percent: r.minBatchSuccessPercent } : {}),
            ...(r.maxConcurrentPerTag != null ? { max_concurrent_per_tag: r.maxConcurrentPerTag } : {}),
            ...(r.healthWindowMinutes != null ? { health_window_minutes: r.healthWindowMinutes } : {}),
            ...(r.healthMaxReconnects != null ? { health_max_reconnects: r.healthMaxReconnects } : {}),
          },
        }
      : {}),
    ...(input.respectMaintenanceWindow != null ? { respect_maintenance_window: input.respectMaintenanceWindow } : {}),
    ...(input.scheduledAt != null ? { scheduled_at: input.scheduledAt } : {}),
  };
}

async function orNull<T>(work: Promise<T>): Promise<T | null> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof DomainError && error.code === 'not_found') return null;
    throw error;
  }
}

export const deploymentResolvers = {
  Query: {
    firmwareVersions: (_: unknown, args: { model?: string | null }, ctx: GraphQLContext) =>
      ctx.services.firmware.list(ctx.actor, args.model != null ? { model: args.model } : {}),
    deployments: async (
      _: unknown,
      args: { first?: number | null; after?: string | null; status?: Deployment['status'] | null },
      ctx: GraphQLContext,
    ) => {
      const page = await ctx.services.deployments.list(ctx.actor, {
        limit: args.first ?? 20,
        ...(args.after ? { cursor: args.after } : {}),
        ...(args.status ? { status: args.status } : {}),
      });
      return connection(page.deployments, (d) => d.id, page.nextCursor, { totalCount: null });
    },
    deployment: (_: unknown, args: { id: string }, ctx: GraphQLContext) =>
      orNull(ctx.services.deployments.get(ctx.actor, { id: args.id })),
    deployPreview: (_: unknown, args: { input: DeployArgs }, ctx: GraphQLContext) =>
      ctx.services.deployments.preview(ctx.actor, toDeployInput(args.input)),
  },
  Mutation: {
    deployFirmware: (_: unknown, args: { input: DeployArgs }, ctx: GraphQLContext) =>
      ctx.services.deployments.deploy(ctx.actor, toDeployInput(args.input)),
    cancelDeployment: (_: unknown, args: { id: string }, ctx: GraphQLContext) =>
      ctx.services.deployments.cancel(ctx.actor, { id: args.id }),
    pauseDeployment: (_: unknown, args: { id: string }, ctx: GraphQLContext) =>
      ctx.services.deployments.pause(ctx.actor, { id: args.id }),
    resumeDeployment: (_: unknown, args: { id: string }, ctx: GraphQLContext) =>
      ctx.services.deployments.resume(ctx.actor, { id: args.id }),
    rollbackDeployment: (_: unknown, args: { id: string }, ctx: GraphQLContext) =>
      ctx.services.deployments.rollback(ctx.actor, { id: args.id }),
    retryFailedDeployment: (_: unknown, args: { id: string }, ctx: GraphQLContext) =>
      ctx.services.deployments.retryFailed(ctx.actor, { id: args.id }),
  },
  Deployment: {
    filter: (d: Deployment) => ({
      model: d.filter.model ?? null,
      firmwareLt: d.filter.firmware_lt ?? null,
      status: d.filter.status ?? null,
      serials: d.filter.serials ?? null,
    }),
    counts: (d: Deployment) => ({
      ...d.counts,
      timedOut: d.counts.timed_out,
      rolledBack: d.counts.rolled_back,
      healthFailed: d.counts.health_failed,
    }),
    progress: (d: Deployment) => progressPercent(d),
    rollout: (d: Deployment) => (d.rollout ? presentRollout(d.rollout) : null),
    updates: async (
      d: Deployment,
      args: { first?: number | null; after?: string | null; state?: string | null },
      ctx: GraphQLContext,
    ) => {
      const first = args.first ?? 50;
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
      const totalCount = args.state ? (d.counts[args.state as keyof Deployment['counts']] ?? 0) : d.targetCount;
      return connection(
        page.devices.map((u: DeviceUpdateView) => ({ ...u, deploymentId: d.id })),
        (u) => cursorCodec.encode([u.serial]),
        page.nextCursor,
        { totalCount },
      );
    },
  },
  Subscription: {
    deploymentProgress: {
      subscribe: (_: unknown, args: { id: string }, ctx: GraphQLContext) =>
        ctx.live.deploymentProgress(ctx.actor, args.id),
      resolve: (deployment: unknown) => deployment,
    },
  },
};

function presentRollout(r: Rollout) {
  return {
    batches: r.batches,
    steps: r.batches,
    failureThresholdPercent: r.failure_threshold_percent ?? null,
    minBatchSuccessPercent: r.min_batch_success_percent,
    maxConcurrentPerTag: r.max_concurrent_per_tag ?? null,
    healthWindowMinutes: r.health_window_minutes,
    healthMaxReconnects: r.health_max_reconnects,
  };
}
