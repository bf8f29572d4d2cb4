import type { Role } from '../shared/actor';

/** An account as the operator manages it; money in minor units (cents). */
export interface Account {
  id: string;
  name: string;
  quota: number;
  budgetMinor: number;
  currency: string;
  unitPriceMinor: number;
  /** Percent of quota and of budget announced once each when reached. */
  thresholds: number[];
  createdAt: string;
}

/** What a claim needs of its account: read with the account row locked (AllocationService.lockForClaim). */
export type LockedAccount = Pick<
  Account,
  'id' | 'quota' | 'budgetMinor' | 'currency' | 'unitPriceMinor' | 'thresholds'
>;

export interface User {
  id: string;
  email: string;
  role: Role;
  createdAt: string;
}

export interface ApiKey {
  id: string;
  name: string;
  /** First characters of the secret, enough to recognise it in a list. */
  prefix: string;
  role: Role;
  rateLimitPerMinute: number | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
  createdAt: string;
}
