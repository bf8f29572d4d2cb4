import type { Knex } from 'knex';
import type { Actor } from '../shared/actor';
import { DomainError, notFound } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { isValidSerial } from '../devices/device-types';
import { toDeployment, type Deployment, type DeviceUpdateView } from './deployment-types';
import { ListDeploymentDevicesInput, ListDeploymentsInput, cursorCodec } from './deployment-inputs';
import { countsFor, findDeployment, listDeployments, type NamedDeployment } from './store/deployments.store';
import { listDeploymentUpdates } from './store/update-views.store';

// Reading deployments: one, a page of them, and a page of one deployment's per-device states.

/** One deployment of the caller's account with its per-state counts. */
export async function getDeployment(knex: Knex, actor: Actor, input: { id: string }): Promise<Deployment> {
  const { deployment, model } = await findNamedDeployment(knex, actor, input.id);
  const counts = await countsFor(knex, [deployment.id]);
  return toDeployment(deployment, counts.get(deployment.id)!, model);
}

/** Newest first, keyset paged. */
export async function listDeploymentsPage(
  knex: Knex,
  actor: Actor,
  raw: ListDeploymentsInput,
): Promise<{ deployments: Deployment[]; nextCursor: string | null }> {
  const input = ListDeploymentsInput.parse(raw);
  let before: { createdAt: string; id: string } | undefined;
  if (input.cursor) {
    const [createdAt, id] = cursorCodec.decode(input.cursor, 2) as [string, string];
    if (!isUuid(id) || Number.isNaN(Date.parse(createdAt)))
      throw new DomainError('validation_failed', 'The cursor is not one this list returned.', {
        errors: [{ field: 'cursor', message: 'is invalid' }],
      });
    before = { createdAt, id };
  }
  const rows = await listDeployments(knex, {
    accountId: actor.accountId,
    status: input.status,
    before,
    limit: input.limit + 1,
  });
  const more = rows.length > input.limit;
  const page = more ? rows.slice(0, input.limit) : rows;
  const counts = await countsFor(
    knex,
    page.map((r) => r.deployment.id),
  );
  const last = page[page.length - 1]?.deployment;
  return {
    deployments: page.map((r) => toDeployment(r.deployment, counts.get(r.deployment.id)!, r.model)),
    nextCursor: more && last ? cursorCodec.encode([last.createdAt.toISOString(), last.id]) : null,
  };
}

/** The per-device states of a deployment, by serial, paged; `state=superseded` lists the ones taken over. */
export async function deploymentDevicesPage(
  knex: Knex,
  actor: Actor,
  input: { id: string } & ListDeploymentDevicesInput,
): Promise<{ devices: DeviceUpdateView[]; nextCursor: string | null }> {
  const { id, ...rest } = input;
  const page = ListDeploymentDevicesInput.parse(rest);
  const { deployment } = await findNamedDeployment(knex, actor, id);
  let afterSerial: string | undefined;
  if (page.cursor) {
    const [serial] = cursorCodec.decode(page.cursor, 1) as [string];
    if (!isValidSerial(serial))
      throw new DomainError('validation_failed', 'The cursor is not one this list returned.', {
        errors: [{ field: 'cursor', message: 'is invalid' }],
      });
    afterSerial = serial;
  }
  const rows = await listDeploymentUpdates(knex, {
    deploymentId: deployment.id,
    state: page.state,
    afterSerial,
    limit: page.limit + 1,
  });
  const more = rows.length > page.limit;
  const items = more ? rows.slice(0, page.limit) : rows;
  return { devices: items, nextCursor: more ? cursorCodec.encode([items[items.length - 1]!.serial]) : null };
}

/** The caller's deployment with its model's name; not_found for another account's or a malformed id. */
export async function findNamedDeployment(
  db: Knex | Knex.Transaction,
  actor: Actor,
  id: string,
): Promise<NamedDeployment> {
  if (!isUuid(id)) throw notFound('Deployment');
  const found = await findDeployment(db, { accountId: actor.accountId, id });
  if (!found) throw notFound('Deployment');
  return found;
}
