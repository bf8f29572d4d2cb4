import type { Knex } from 'knex';
import type { Actor } from '../shared/actor';
import type { ServiceDeps } from '../service-deps';
import { notFound } from '../shared/errors';
import { invalidCursor, keysetPage } from '../shared/cursor';
import { isUuid } from '../shared/ids';
import { isValidSerial } from '../devices/device-types';
import { toDeployment, type Deployment, type DeviceUpdateView } from './deployment-types';
import { ListDeploymentDevicesInput, ListDeploymentsInput, cursorCodec } from './deployment-inputs';
import { findDeployment, listDeployments, type NamedDeployment } from './store/deployments.store';
import { listDeploymentUpdates } from './store/update-views.store';
import { heldOfDeployments } from './held-updates';
import { figuresOf } from './deployment-figures';

// Reading deployments: one, a page of them, and a page of one deployment's per-device states.

/** A view may keep a finished deployment's figures (deployment-figures.ts): it logs a failure to. */
type ReaderDeps = Pick<ServiceDeps, 'knex' | 'clock' | 'logger'>;

/** One deployment of the caller's account with its per-state counts and failures per error code. */
export async function getDeployment(deps: ReaderDeps, actor: Actor, input: { id: string }): Promise<Deployment> {
  const { knex } = deps;
  const now = deps.clock.now();
  const { deployment, model } = await findNamedDeployment(knex, actor, input.id);
  const [figures, held] = await Promise.all([
    figuresOf(deps, [deployment]),
    heldOfDeployments(knex, { accountId: deployment.accountId, deploymentIds: [deployment.id], now }),
  ]);
  const { counts, failures, transfer } = figures.get(deployment.id)!;
  return { ...toDeployment(deployment, counts, model, failures), held: held.get(deployment.id)!, transfer };
}

/** Newest first, keyset paged. */
export async function listDeploymentsPage(
  deps: ReaderDeps,
  actor: Actor,
  raw: ListDeploymentsInput,
): Promise<{ deployments: Deployment[]; cursors: string[]; nextCursor: string | null }> {
  const { knex } = deps;
  const now = deps.clock.now();
  const input = ListDeploymentsInput.parse(raw);
  let before: { createdAt: string; id: string } | undefined;
  if (input.cursor) {
    const [createdAt, id] = cursorCodec.decode(input.cursor, 2) as [string, string];
    if (!isUuid(id) || Number.isNaN(Date.parse(createdAt))) throw invalidCursor();
    before = { createdAt, id };
  }
  const rows = await listDeployments(knex, {
    accountId: actor.accountId,
    status: input.status,
    before,
    limit: input.limit + 1,
  });
  const page = keysetPage(rows, input.limit, (r) =>
    cursorCodec.encode([r.deployment.createdAt.toISOString(), r.deployment.id]),
  );
  const ids = page.items.map((r) => r.deployment.id);
  const [figures, held] = await Promise.all([
    figuresOf(
      deps,
      page.items.map((r) => r.deployment),
    ),
    heldOfDeployments(knex, { accountId: actor.accountId, deploymentIds: ids, now }),
  ]);
  return {
    deployments: page.items.map((r) => {
      const { counts, failures, transfer } = figures.get(r.deployment.id)!;
      return {
        ...toDeployment(r.deployment, counts, r.model, failures),
        held: held.get(r.deployment.id)!,
        transfer,
      };
    }),
    cursors: page.cursors,
    nextCursor: page.nextCursor,
  };
}

/** The per-device states of a deployment, by serial, paged; `state=superseded` lists the ones taken over. */
export async function deploymentDevicesPage(
  knex: Knex,
  actor: Actor,
  input: { id: string } & ListDeploymentDevicesInput,
  now: Date,
): Promise<{ devices: DeviceUpdateView[]; cursors: string[]; nextCursor: string | null }> {
  const { id, ...rest } = input;
  const page = ListDeploymentDevicesInput.parse(rest);
  const { deployment } = await findNamedDeployment(knex, actor, id);
  let afterSerial: string | undefined;
  if (page.cursor) {
    const [serial] = cursorCodec.decode(page.cursor, 1) as [string];
    if (!isValidSerial(serial)) throw invalidCursor();
    afterSerial = serial;
  }
  const rows = await listDeploymentUpdates(knex, {
    accountId: deployment.accountId,
    deploymentId: deployment.id,
    state: page.state,
    afterSerial,
    limit: page.limit + 1,
    now,
  });
  const { items, cursors, nextCursor } = keysetPage(rows, page.limit, (r) => cursorCodec.encode([r.serial]));
  return { devices: items, cursors, nextCursor };
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
