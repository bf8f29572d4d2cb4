import type { Db } from '../../db/db';
import { versionKey } from '../../shared/version';
import { DELTA_FORMAT } from './delta-format';
import { deltasOfPairs, imagesOf, type DeltaPair } from '../store/firmware-deltas.store';

/**
 * What a dry run says of deltas, per version the targets run (docs/ota.md "Delta images"):
 * - `ready`: built; `delta_size` against `full_size`;
 * - `building`: another request started it; `will_be_built`: not built yet (the dry run starts it);
 * - `too_large`: an image is above the size cap, devices get the full image;
 * - `no_gain`: the delta is not smaller than the image; `failed`: the build failed;
 * - `no_source_image`: the version the devices run has no binary here (never uploaded or deleted).
 * Devices that reported no version yet get the full image and are not listed.
 */
export type DeltaPreviewStatus =
  'ready' | 'building' | 'will_be_built' | 'too_large' | 'no_gain' | 'failed' | 'no_source_image';

export interface DeltaPreview {
  fromVersion: string;
  devices: number;
  status: DeltaPreviewStatus;
  fullSize: number;
  deltaSize: number | null;
}

export async function previewDeltas(
  db: Db,
  input: {
    accountId: string;
    modelId: string;
    firmwareId: string;
    sources: Array<{ firmware: string | null; devices: number }>;
    maxImageBytes: number;
    /** Starts the builds the preview lists as `will_be_built`. */
    ensure?: (pair: DeltaPair) => void;
  },
): Promise<DeltaPreview[]> {
  const sources = input.sources.filter((s): s is { firmware: string; devices: number } => s.firmware !== null);
  const { target, sources: images } = await imagesOf(db, {
    accountId: input.accountId,
    modelId: input.modelId,
    firmwareId: input.firmwareId,
    versionKeys: sources.map((s) => versionKey(s.firmware)),
  });
  if (!target?.storageKey) return [];
  const pairs = new Map<string, DeltaPair>();
  for (const s of sources) {
    const image = images.get(versionKey(s.firmware));
    if (image?.storageKey && image.sha256 !== target.sha256)
      pairs.set(s.firmware, {
        fromSha256: image.sha256,
        fromKey: image.storageKey,
        fromSize: image.size,
        toSha256: target.sha256,
        toKey: target.storageKey,
        toSize: target.size,
      });
  }
  const cached = await deltasOfPairs(db, { pairs: [...pairs.values()], format: DELTA_FORMAT });
  return sources
    .filter((s) => images.get(versionKey(s.firmware))?.sha256 !== target.sha256)
    .sort((x, y) => y.devices - x.devices || x.firmware.localeCompare(y.firmware))
    .map((s) => {
      const pair = pairs.get(s.firmware);
      const base = { fromVersion: s.firmware, devices: s.devices, fullSize: target.size, deltaSize: null };
      if (!pair) return { ...base, status: 'no_source_image' as const };
      const row = cached.get(`${pair.fromSha256}:${pair.toSha256}`);
      if (!row) {
        if (Math.max(pair.fromSize, pair.toSize) > input.maxImageBytes)
          return { ...base, status: 'too_large' as const };
        input.ensure?.(pair);
        return { ...base, status: 'will_be_built' as const };
      }
      if (row.status === 'ready' && row.size !== null)
        return row.size < target.size
          ? { ...base, status: 'ready' as const, deltaSize: row.size }
          : { ...base, status: 'no_gain' as const, deltaSize: row.size };
      return { ...base, status: row.status };
    });
}
