import { z } from 'zod';
import type { ServiceDeps } from '../service-deps';
import { newId } from '../shared/ids';
import { DomainError, notFound } from '../shared/errors';
import { hashPassword } from '../shared/secrets';
import { toMinor } from './money';
import type { ApiKeyService } from './api-key.service';
import { systemActor } from '../shared/actor';

export const CreateAccountInput = z.object({
  name: z.string().trim().min(1).max(200),
  quota: z.number().int().min(0).max(100_000_000),
  budget: z.number().min(0).max(1e12),
  currency: z.string().regex(/^[A-Z]{3}$/, 'a three-letter ISO 4217 code such as EUR'),
  unitPrice: z.number().min(0).max(1e9),
  adminEmail: z.string().trim().toLowerCase().email().max(254),
  adminPassword: z.string().min(8).max(200),
  thresholds: z.array(z.number().int().min(1).max(100)).max(10).optional(),
});
export type CreateAccountInput = z.infer<typeof CreateAccountInput>;

export const UpdateAccountInput = z.object({
  quota: z.number().int().min(0).max(100_000_000).optional(),
  budget: z.number().min(0).max(1e12).optional(),
  currency: z.string().regex(/^[A-Z]{3}$/).optional(),
  unitPrice: z.number().min(0).max(1e9).optional(),
  name: z.string().trim().min(1).max(200).optional(),
});
export type UpdateAccountInput = z.infer<typeof UpdateAccountInput>;

export interface AccountRow {
  id: string;
  name: string;
  quota: number;
  budget_minor: number;
  currency: string;
  unit_price_minor: number;
  thresholds: number[];
  created_at: Date;
}

export interface CreatedAccount {
  accountId: string;
  adminUserId: string;
  apiKey: string;
  apiKeyId: string;
}

/** Operator-level account management (the `fleet` tool and the demo seed); not exposed over HTTP. */
export class AccountService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly apiKeys: ApiKeyService,
  ) {}

  async create(raw: CreateAccountInput): Promise<CreatedAccount> {
    const input = CreateAccountInput.parse(raw);
    const passwordHash = await hashPassword(input.adminPassword);
    return this.deps.transaction(async (trx) => {
      const taken = await trx('users').where({ email: input.adminEmail }).first('id');
      if (taken) throw new DomainError('already_exists', `A user with e-mail ${input.adminEmail} exists already.`);
      const accountId = newId();
      await trx('accounts').insert({
        id: accountId,
        name: input.name,
        quota: input.quota,
        budget_minor: toMinor(input.budget),
        currency: input.currency,
        unit_price_minor: toMinor(input.unitPrice),
        thresholds: input.thresholds ?? [80, 90, 100],
      });
      const adminUserId = newId();
      await trx('users').insert({
        id: adminUserId,
        account_id: accountId,
        email: input.adminEmail,
        password_hash: passwordHash,
        role: 'admin',
      });
      const key = await this.apiKeys.create(systemActor(accountId), { name: 'admin (created with the account)', role: 'admin' }, trx);
      return { accountId, adminUserId, apiKey: key.secret, apiKeyId: key.apiKey.id };
    });
  }

  async update(accountId: string, raw: UpdateAccountInput): Promise<AccountRow> {
    const input = UpdateAccountInput.parse(raw);
    const patch: Record<string, unknown> = {};
    if (input.quota !== undefined) patch.quota = input.quota;
    if (input.budget !== undefined) patch.budget_minor = toMinor(input.budget);
    if (input.currency !== undefined) patch.currency = input.currency;
    if (input.unitPrice !== undefined) patch.unit_price_minor = toMinor(input.unitPrice);
    if (input.name !== undefined) patch.name = input.name;
    if (Object.keys(patch).length > 0) {
      const n = await this.deps.knex('accounts').where({ id: accountId }).update(patch);
      if (n === 0) throw notFound('Account');
    }
    return this.get(accountId);
  }

  async get(accountId: string): Promise<AccountRow> {
    const row = (await this.deps.knex('accounts').where({ id: accountId }).first()) as AccountRow | undefined;
    if (!row) throw notFound('Account');
    return row;
  }

  async list(): Promise<AccountRow[]> {
    return (await this.deps.knex('accounts').orderBy('created_at')) as AccountRow[];
  }

  async count(): Promise<number> {
    const row = (await this.deps.knex('accounts').count<{ count: string }[]>('* as count'))[0];
    return Number(row?.count ?? 0);
  }
}
