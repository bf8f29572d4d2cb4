import type { Db } from '../db/db';
import { firmwareUnsigned } from './firmware-signature';
import { currentSigningKey } from './store/signing-keys.store';
import { unsignedVersionsAmong } from './store/firmware-versions.store';

/**
 * The rule every path that sends firmware to devices goes through (deploys and their dry runs,
 * retries, rollbacks, claim-time firmware): once the account registered a signing key, no
 * unsigned version is scheduled. Such a version was uploaded before the key; devices that check
 * signatures would refuse it one by one in the field, exactly when it is needed to undo a bad
 * release. 422 `firmware_unsigned` names the versions, before anything is recorded or sent
 * (docs/signed-firmware.md "Sign a version uploaded before the key"). Without a key, unsigned
 * firmware goes as it always did. Read in the caller's unit of work.
 */
export async function requireSignedFirmware(
  db: Db,
  input: { accountId: string; firmwareVersionIds: string[] },
): Promise<void> {
  const ids = [...new Set(input.firmwareVersionIds)];
  if (ids.length === 0) return;
  const key = await currentSigningKey(db, input.accountId);
  if (!key) return;
  const unsigned = await unsignedVersionsAmong(db, { accountId: input.accountId, ids });
  if (unsigned.length > 0) throw firmwareUnsigned({ versions: unsigned, keyId: key.keyId });
}
