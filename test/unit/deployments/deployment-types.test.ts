import { describe, expect, it } from 'vitest';
import {
  DEPLOYMENT_STATUSES,
  FINAL_UPDATE_STATES,
  UPDATE_STATES,
  allowedActions,
  isActive,
  isFinal,
  type DeploymentStatus,
} from '#core/deployments/deployment-types';

/** What the API exposes of the status rules (GraphQL Deployment.active, allowedActions, DeviceUpdate.final). */
describe('deployment status rules', () => {
  const table: [DeploymentStatus, boolean, string[]][] = [
    ['scheduled', true, ['pause', 'cancel']],
    ['running', true, ['pause', 'cancel']],
    ['paused', true, ['resume', 'cancel']],
    ['completed', false, []],
    ['completed_with_failures', false, []],
    // Final like completed: newer deployments took over every target, nothing is left to act on.
    ['superseded', false, []],
    ['cancelled', false, []],
  ];

  it.each(table)('%s: active %s, actions %j', (status, active, actions) => {
    expect(isActive(status)).toBe(active);
    expect(allowedActions(status)).toEqual(actions);
  });

  it('covers every status', () => {
    expect(table.map(([status]) => status).sort()).toEqual([...DEPLOYMENT_STATUSES].sort());
  });

  it('calls exactly the final update states final', () => {
    expect(UPDATE_STATES.filter(isFinal)).toEqual([...FINAL_UPDATE_STATES]);
  });
});
