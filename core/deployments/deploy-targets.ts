import type { z } from 'zod';
import type { Knex } from 'knex';
import type { Actor } from '../shared/actor';
import { DomainError } from '../shared/errors';
import { requireVersion, versionKey } from '../shared/version';
import { isValidSerial } from '../devices/device-types';
import type { DeploymentFilter } from './deployment-types';
import { DeployInput, fileMissing, versionNotFound, type DeploymentArea } from './deployment-inputs';
import { previewTargets, targetVersionsOf, targetWhere, type TargetQuery } from './store/targets.store';
import { previewPaths, type UpgradePathsPreview } from './upgrade-paths';
import { heldAmongTargets, type HeldSummary } from './held-updates';
import type { DeltaPreview } from '../firmware/delta/delta-preview';
import { firmwareRefsWithKey, requireSignedFirmware, type FirmwareRef } from '../firmware/firmware-records';
import { resolveSiteRef } from '../sites/site.service';

/** Dry run: what `deploy` would target now; writes nothing. */
export async function previewDeploy(
  area: Pick<DeploymentArea, 'deps' | 'models' | 'deltas'>,
  actor: Actor,
  raw: DeployInput,
): Promise<{
  targetCount: number;
  sampleSerials: string[];
  model: string;
  targetVersion: string;
  held: HeldSummary;
  upgradePaths: UpgradePathsPreview;
  deltas: DeltaPreview[];
}> {
  const { deps, models } = area;
  const input = DeployInput.parse(raw);
  const { query, firmware } = await resolveDeployTargets(deps.knex, { actor, input, models });
  const [{ count, sample }, held] = await Promise.all([
    previewTargets(deps.knex, { query, sample: 10 }),
    // Targets a device lock or a site freeze holds now: they are recorded all the same and wait.
    heldAmongTargets(deps.knex, { where: targetWhere(query), now: deps.clock.now() }),
  ]);
  // The upgrade paths the deploy would plan, per version the targets report (upgrade-paths.ts).
  const sources = await targetVersionsOf(deps.knex, query);
  const upgradePaths = await previewPaths(deps.knex, {
    accountId: actor.accountId,
    modelId: firmware.modelId,
    target: { id: firmware.id, version: firmware.version },
    sources,
  });
  // As the deploy would: a path through an unsigned stepping stone is refused (firmware_unsigned).
  if (upgradePaths.steppingStoneIds.length > 0)
    await requireSignedFirmware(deps.knex, {
      accountId: actor.accountId,
      firmwareVersionIds: upgradePaths.steppingStoneIds,
    });
  // Per version the targets run: the delta to the target, its size or why none (delta-preview.ts).
  const deltas =
    (await area.deltas?.preview({
      accountId: actor.accountId,
      modelId: firmware.modelId,
      firmwareId: firmware.id,
      sources,
    })) ?? [];
  return {
    targetCount: count,
    sampleSerials: sample,
    model: firmware.model,
    targetVersion: firmware.version,
    held,
    upgradePaths,
    deltas,
  };
}

/**
 * What a deploy request targets: its versions and serials checked, the firmware it names (with
 * its binary, and signed when the account has a signing key: 422 firmware_unsigned), the query
 * selecting its devices, and the filter recorded on the deployment.
 */
export async function resolveDeployTargets(
  db: Knex | Knex.Transaction,
  { actor, input, models }: { actor: Actor; input: z.output<typeof DeployInput>; models: DeploymentArea['models'] },
): Promise<{ query: TargetQuery; firmware: FirmwareRef; filter: DeploymentFilter }> {
  requireVersion(input.firmwareVersion, 'firmwareVersion');
  if (input.filter.firmwareLt !== undefined) requireVersion(input.filter.firmwareLt, 'filter.firmwareLt');
  const serials = input.serials ?? input.filter.serials;
  if (serials) {
    const bad = serials.map((s, i) => [s, i] as const).filter(([s]) => !isValidSerial(s));
    if (bad.length > 0) {
      throw new DomainError('invalid_serial', 'Some serials are not valid serial numbers.', {
        errors: bad.map(([, i]) => ({
          field: `${input.serials ? 'serials' : 'filter.serials'}.${i}`,
          message: 'is not a valid serial',
        })),
      });
    }
  }
  let firmware: FirmwareRef;
  const key = versionKey(input.firmwareVersion);
  if (input.filter.model !== undefined) {
    const model = await models.requireByName(actor, input.filter.model, db as Knex.Transaction, 'filter.model');
    const [found] = await firmwareRefsWithKey(db, { accountId: actor.accountId, versionKey: key, modelId: model.id });
    if (!found) throw versionNotFound(input.firmwareVersion, `model "${model.name}"`);
    firmware = found;
  } else {
    const rows = await firmwareRefsWithKey(db, { accountId: actor.accountId, versionKey: key });
    if (rows.length === 0) throw versionNotFound(input.firmwareVersion, 'any model of this account');
    if (rows.length > 1) {
      throw new DomainError(
        'validation_failed',
        `Version ${input.firmwareVersion} exists for several models; name one.`,
        { errors: [{ field: 'filter.model', message: 'is required: the version exists for several models' }] },
      );
    }
    firmware = rows[0]!;
  }
  if (!firmware.storageKey) throw fileMissing([firmware.version]);
  // Dry runs and deploys alike: a dry run that counts targets of a deploy that would be refused misleads.
  await requireSignedFirmware(db, { accountId: actor.accountId, firmwareVersionIds: [firmware.id] });
  const filter: DeploymentFilter = { model: firmware.model };
  if (input.filter.firmwareLt !== undefined) filter.firmware_lt = input.filter.firmwareLt;
  if (input.filter.status !== undefined) filter.status = input.filter.status;
  if (serials) filter.serials = serials;
  // Another account's site is not found (404), like an unknown one: never a silent empty deploy.
  const site =
    input.filter.site === undefined
      ? undefined
      : await resolveSiteRef(db, actor.accountId, input.filter.site, 'filter.site');
  if (site) filter.site = site.id;
  return {
    query: {
      accountId: actor.accountId,
      modelId: firmware.modelId,
      targetVersion: firmware.version,
      firmwareLt: input.filter.firmwareLt,
      status: input.filter.status,
      serials,
      siteId: site?.id,
    },
    firmware,
    filter,
  };
}
