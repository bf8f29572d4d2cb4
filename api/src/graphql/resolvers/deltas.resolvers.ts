import type { Resolvers } from '../generated/resolvers-types';
import { noTransfer } from '#core/deployments/delta-transfer';

/** Delta images (docs/ota.md "Delta images"): what a deployment shows of them; a dry run's `deltas` are read as they are. */
export const deltaResolvers: Resolvers = {
  Deployment: {
    transfer: (d) => d.transfer ?? noTransfer(),
  },
};
