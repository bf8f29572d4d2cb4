import { DomainError } from './errors';

export type Role = 'admin' | 'viewer';
export const ROLES: readonly Role[] = ['admin', 'viewer'];

/** Who is calling: every service method takes one and scopes all data to `accountId`. */
export interface Actor {
  accountId: string;
  role: Role;
  /** `user:<id>`, `api_key:<id>`, `device:<serial>` or `system`: recorded in history. */
  principal: string;
  /** Set for API-key callers: rate limits are counted per key. */
  apiKeyId?: string;
}

export function requireAdmin(actor: Actor): void {
  requireRole(actor, 'admin');
}

/** Viewers may do what every role may do; admins may do everything. */
export function requireRole(actor: Actor, role: Role): void {
  if (role === 'admin' && actor.role !== 'admin')
    throw new DomainError('forbidden', 'This action needs the admin role.');
}

export function systemActor(accountId: string): Actor {
  return { accountId, role: 'admin', principal: 'system' };
}
