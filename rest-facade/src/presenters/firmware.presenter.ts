import type { FirmwareVersion } from '#core/firmware/firmware.service';
import type { SigningKey, SigningKeys } from '#core/firmware/signing-key.service';

export const presentFirmwareVersion = (v: FirmwareVersion) => ({
  id: v.id,
  model: v.model,
  version: v.version,
  release_notes: v.releaseNotes,
  changelog: v.changelog,
  size: v.size,
  sha256: v.sha256,
  file_available: v.fileAvailable,
  signed: v.signed,
  key_id: v.signingKeyId,
  signature: v.signature,
  upgrade_from: v.upgradeFrom,
  created_at: v.createdAt,
});

const presentSigningKey = (k: SigningKey) => ({
  key_id: k.keyId,
  algorithm: k.algorithm,
  public_key: k.publicKey,
  created_at: k.createdAt,
  retired_at: k.retiredAt,
});

export const presentSigningKeys = (keys: SigningKeys) => ({
  signing_key: keys.current ? presentSigningKey(keys.current) : null,
  retired_keys: keys.retired.map(presentSigningKey),
});
