/**
 * What a deployment's devices were sent to download (docs/ota.md "Delta images"): `bytesSent`
 * counts the delta for each update whose command offered one (the delta and the full image for
 * one that fell back), `fullImageBytes` what full images alone would have been, `deltaUpdates`
 * how many updates were offered a delta and did not fall back. Retried or resumed downloads are
 * not counted again: these are the files' sizes, not the traffic.
 */
export interface TransferSummary {
  bytesSent: number;
  fullImageBytes: number;
  deltaUpdates: number;
}

export const noTransfer = (): TransferSummary => ({ bytesSent: 0, fullImageBytes: 0, deltaUpdates: 0 });
