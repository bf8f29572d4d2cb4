import type { Knex } from 'knex';

/**
 * A device claimed with a firmware version that has not reported yet now counts as running that
 * version for version comparisons (`firmware_lt` in lists, dry runs and deploys): the claim
 * writes it to `firmware_key` while `firmware`, what the device reported, stays null. Before, a
 * device claimed on 1.0.0 that had never connected was matched by no `firmware_lt` filter, so a
 * deploy of 1.10.0 missed it and it later installed 1.0.0 and stayed there.
 *
 * Devices claimed before this migration get the version of their claim's deployment.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    UPDATE devices d SET firmware_key = f.version_key
      FROM device_updates u
      JOIN deployments dep ON dep.id = u.deployment_id AND dep.kind = 'claim'
      JOIN firmware_versions f ON f.id = dep.firmware_version_id
     WHERE u.device_id = d.id AND d.firmware IS NULL AND d.firmware_key IS NULL`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('UPDATE devices SET firmware_key = NULL WHERE firmware IS NULL');
}
