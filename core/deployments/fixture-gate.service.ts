import type { Actor } from '../shared/actor';
import { notFound } from '../shared/errors';
import type { ServiceDeps } from '../service-deps';
import { appendEvents } from '../events/outbox';
import { decideFixtureGate, FIXTURE_SIGNALS, type GateDecision } from '../health/fixture-gate';
import type { HealthService } from '../health/health.service';
import { DEFAULT_ROLLOUT, Rollout } from './deployment-types';
import { lockDeployment, updateDeployment } from './store/deployments.store';
import {
  saveGateDecision,
  selectDeploymentForGate,
  selectGatedDeployments,
  selectGateDecisions,
} from './store/fixture-gate.store';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type GateRow = {
  id: string;
  account_id: string;
  model: string;
  target_version: string;
  started_at: Date | null;
  created_at: Date;
  rollout: Record<string, unknown> | null;
};

export interface FixtureGateView {
  deploymentId: string;
  /** Whether the rollout names fixture signals (otherwise `current` judges every measured signal, for information: it never pauses). */
  gated: boolean;
  /** The decision on the data as it is now (canary against control). */
  current: GateDecision;
  /** The decision the gate pass stored last, and when it paused the deployment (null: never). */
  recorded: { decision: GateDecision; evaluatedAt: string; pausedAt: string | null } | null;
}

/**
 * The rollout health gate's fixture signals (docs/ota.md "Health gate"): for each running
 * deployment that names fixture signals, canary (its updated devices) against control (the
 * model's not-yet-updated devices), decided by core/health/fixture-gate.ts; a `pause` decision
 * pauses the deployment (reason `fixture_health`) with the evidence in the `deployment.paused`
 * event and in `deployment_fixture_gate`. The per-device reconnect rule of the same gate runs on
 * every reconnect (ota-reports.ts applyHealthGate).
 */
export class FixtureGateService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly area: { health: HealthService },
  ) {}

  /** `showAll`: judge every measured signal (the deployment page shows them even when the rollout names none). */
  private async decide(d: GateRow, showAll = false): Promise<GateDecision> {
    const rollout = Rollout.parse(d.rollout ?? DEFAULT_ROLLOUT);
    const signals = showAll && rollout.fixture_signals.length === 0 ? [...FIXTURE_SIGNALS] : rollout.fixture_signals;
    const groups = await this.area.health.deploymentGroups({
      accountId: d.account_id,
      deploymentId: d.id,
      model: d.model,
      target: d.target_version,
      since: new Date(d.started_at ?? d.created_at),
      baselineDays: rollout.fixture_baseline_days,
    });
    return decideFixtureGate(groups, {
      signals,
      maxRatio: rollout.fixture_max_ratio,
      minDeviceDays: rollout.fixture_min_device_days,
      minEvents: rollout.fixture_min_events,
      confidence: rollout.fixture_confidence,
    });
  }

  /** One pass over every gated running deployment; answers the ids it paused. */
  async evaluateAll(): Promise<string[]> {
    const paused: string[] = [];
    for (const d of await selectGatedDeployments(this.deps.knex)) {
      const decision = await this.decide(d);
      const now = this.deps.clock.now();
      const didPause = await this.deps.transaction(async (trx) => {
        const locked = await lockDeployment(trx, d.id);
        // Paused, cancelled or finished meanwhile: record the evidence, change nothing. Once a person
        // resumed a deployment the gate paused, the gate keeps recording but does not pause it again.
        const pause = decision.state === 'pause' && locked?.status === 'running' && d.paused_at === null;
        await saveGateDecision(trx, { accountId: d.account_id, deploymentId: d.id, decision, now, paused: pause });
        if (!pause) return false;
        await updateDeployment(trx, {
          id: d.id,
          change: { status: 'paused', pausedReason: 'fixture_health', updatedAt: now },
        });
        await appendEvents(trx, this.deps.clock, [
          {
            accountId: d.account_id,
            type: 'deployment.paused',
            subject: d.id,
            data: { deployment_id: d.id, reason: 'fixture_health', summary: decision.summary, fixture_gate: decision },
          },
        ]);
        return true;
      });
      if (didPause) paused.push(d.id);
    }
    return paused;
  }

  /** Canary against control of one deployment, now and as last recorded. */
  async view(actor: Actor, input: { deploymentId: string }): Promise<FixtureGateView> {
    if (!UUID.test(input.deploymentId)) throw notFound('Deployment');
    const d = await selectDeploymentForGate(this.deps.knex, {
      accountId: actor.accountId,
      deploymentId: input.deploymentId,
    });
    if (!d) throw notFound('Deployment');
    const [recorded] = await selectGateDecisions(this.deps.knex, { accountId: actor.accountId, deploymentIds: [d.id] });
    return {
      deploymentId: d.id,
      gated: Rollout.parse(d.rollout ?? DEFAULT_ROLLOUT).fixture_signals.length > 0,
      current: await this.decide(d, true),
      recorded: recorded
        ? {
            decision: recorded.decision as GateDecision,
            evaluatedAt: new Date(recorded.evaluated_at).toISOString(),
            pausedAt: recorded.paused_at ? new Date(recorded.paused_at).toISOString() : null,
          }
        : null,
    };
  }
}
