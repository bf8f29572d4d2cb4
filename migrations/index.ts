import type { Knex } from 'knex';
import * as createCoreSchema from './20261122000000_create_core_schema';
import * as addWebhookDeliveryIndexes from './20261122010500_add_webhook_delivery_indexes';
import * as addDevicePresenceDeadline from './20261122010700_add_device_presence_deadline';
import * as addOtaEngineColumns from './20261122011000_add_ota_engine_columns';
import * as leanUpdateTargets from './20261123000000_lean_update_targets';
import * as heartbeatHotUpdates from './20261123010000_heartbeat_hot_updates';
import * as retentionIndexes from './20261124000000_retention_indexes';
import * as statusChangesInPlace from './20261124010000_status_changes_in_place';
import * as idempotencyKeyPrincipal from './20261125000000_idempotency_key_principal';
import * as claimFirmwareForComparisons from './20261125020000_claim_firmware_for_comparisons';
import * as loginThrottlePerAddress from './20261125010000_login_throttle_per_address';
import * as addFirmwareSigningKeys from './20261125100000_add_firmware_signing_keys';
import * as deviceCertificates from './20261125110000_device_certificates';
import * as deviceMessageRefusals from './20261127010000_device_message_refusals';
import * as deviceCredentialRotations from './20261127040000_device_credential_rotations';
import * as configMarksAndOtaReports from './20261127030000_config_marks_and_ota_reports';
import * as deviceHeardAt from './20261127050000_device_heard_at';
import * as sites from './20261127120000_sites';
import * as updateLocks from './20261127121000_update_locks';
import * as firmwareDeltas from './20261127122000_firmware_deltas';
import * as upgradePaths from './20261127123000_upgrade_paths';
import * as luminaireSeries from './20261127140000_luminaire_series';
import * as luminaireFleetGroups from './20261127171000_luminaire_fleet_groups';
import * as deviceSearchTrigrams from './20261127172000_device_search_trigrams';
import * as outboxPendingQueue from './20261127220000_outbox_pending_queue';
import * as deviceSearchTerms from './20261128010000_device_search_terms';
import * as presenceDeadlines from './20261128020000_presence_deadlines';
import * as serialUniqueWithoutOrder from './20261128200000_serial_unique_without_order';
import * as updateLocksByAccount from './20261129010000_update_locks_by_account';
import * as deploymentOutcomes from './20261129040000_deployment_outcomes';
import * as dispatchPagesInBatchOrder from './20261129070000_dispatch_pages_in_batch_order';
import * as succeededUpdatesByDevice from './20261129090000_succeeded_updates_by_device';
import * as fixtureHealth from './20261127160000_fixture_health';
import * as connectionDaysAndFailedMarks from './20261127170000_connection_days_and_failed_marks';

/**
 * Static list of migrations: knex's folder scanning cannot load .ts files under vitest,
 * so every migration is imported here, oldest first. Add new ones at the end.
 */
const migrations: Array<{ name: string; module: Knex.Migration }> = [
  { name: '20261122000000_create_core_schema', module: createCoreSchema },
  { name: '20261122010500_add_webhook_delivery_indexes', module: addWebhookDeliveryIndexes },
  { name: '20261122010700_add_device_presence_deadline', module: addDevicePresenceDeadline },
  { name: '20261122011000_add_ota_engine_columns', module: addOtaEngineColumns },
  { name: '20261123000000_lean_update_targets', module: leanUpdateTargets },
  { name: '20261123010000_heartbeat_hot_updates', module: heartbeatHotUpdates },
  { name: '20261124000000_retention_indexes', module: retentionIndexes },
  { name: '20261124010000_status_changes_in_place', module: statusChangesInPlace },
  { name: '20261125000000_idempotency_key_principal', module: idempotencyKeyPrincipal },
  { name: '20261125010000_login_throttle_per_address', module: loginThrottlePerAddress },
  { name: '20261125020000_claim_firmware_for_comparisons', module: claimFirmwareForComparisons },
  { name: '20261125100000_add_firmware_signing_keys', module: addFirmwareSigningKeys },
  { name: '20261125110000_device_certificates', module: deviceCertificates },
  { name: '20261127010000_device_message_refusals', module: deviceMessageRefusals },
  { name: '20261127040000_device_credential_rotations', module: deviceCredentialRotations },
  { name: '20261127030000_config_marks_and_ota_reports', module: configMarksAndOtaReports },
  { name: '20261127050000_device_heard_at', module: deviceHeardAt },
  { name: '20261127120000_sites', module: sites },
  { name: '20261127121000_update_locks', module: updateLocks },
  { name: '20261127122000_firmware_deltas', module: firmwareDeltas },
  { name: '20261127123000_upgrade_paths', module: upgradePaths },
  { name: '20261127140000_luminaire_series', module: luminaireSeries },
  { name: '20261127160000_fixture_health', module: fixtureHealth },
  { name: '20261127170000_connection_days_and_failed_marks', module: connectionDaysAndFailedMarks },
  { name: '20261127171000_luminaire_fleet_groups', module: luminaireFleetGroups },
  { name: '20261127172000_device_search_trigrams', module: deviceSearchTrigrams },
  { name: '20261127220000_outbox_pending_queue', module: outboxPendingQueue },
  { name: '20261128010000_device_search_terms', module: deviceSearchTerms },
  { name: '20261128020000_presence_deadlines', module: presenceDeadlines },
  { name: '20261128200000_serial_unique_without_order', module: serialUniqueWithoutOrder },
  { name: '20261129010000_update_locks_by_account', module: updateLocksByAccount },
  { name: '20261129040000_deployment_outcomes', module: deploymentOutcomes },
  { name: '20261129070000_dispatch_pages_in_batch_order', module: dispatchPagesInBatchOrder },
  { name: '20261129090000_succeeded_updates_by_device', module: succeededUpdatesByDevice },
];

export const migrationSource: Knex.MigrationSource<{ name: string; module: Knex.Migration }> = {
  getMigrations: () => Promise.resolve(migrations),
  getMigrationName: (m) => m.name,
  getMigration: (m) => Promise.resolve(m.module),
};
