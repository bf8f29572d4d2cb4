/**
 * What deployments may read of firmware versions inside their own unit of work: the version a
 * claim or a deploy targets, with the signing key and storage key its OTA commands carry, and the
 * rule that no unsigned version is scheduled once the account has a signing key. The
 * firmware area's store stays its own: these are the lookups it publishes
 * (test/unit/architecture.test.ts keeps other areas out of its store).
 */
export {
  firmwareIdWithKey,
  firmwareRefsWithKey,
  firmwareVersionsWithKeys,
  firmwareVersionText,
  pathFirmwareById,
  pathFirmwareOf,
  type PathFirmware,
  storageKeyOf,
  type FirmwareRef,
} from './store/firmware-versions.store';
export { requireSignedFirmware } from './signed-delivery';
