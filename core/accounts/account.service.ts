import { z } from 'zod';
import type { ServiceDeps } from '../service-deps';
import { newId } from '../shared/ids';
import { DomainError, notFound } from '../shared/errors';
import { hashPassword } from '../shared/secrets';
import { toMinor } from './money';
import type { ApiKeyService } from './api-key.service';
import { systemActor } from '../shared/actor';
import type { Account } from './account-types';
import { countAccounts, findAccount, insertAccount, listAccounts, updateAccount } from './store/accounts.store';
import { insertUser, isEmailTaken } from './store/users.store';

export type { Account } from './account-types';

export const CreateAccountInput = z.object({
  name: z.string().trim().min(1).max(200),
  quota: z.number().int().min(0).max(100_000_000),
  budget: z.number().min(0).max(1e12),
  currency: z.string().regex(/^[A-Z]{3}$/, 'a three-letter ISO 4217 code such as EUR'),
  unitPrice: z.number().min(0).max(1e9),
  adminEmail: z.string().trim().toLowerCase().pipe(z.email().max(254)),
  adminPassword: z.string().min(8).max(200),
  thresholds: z.array(z.number().int().min(1).max(100)).max(10).optional(),
});
export type CreateAccountInput = z.infer<typeof CreateAccountInput>;

export const UpdateAccountInput = z.object({
  quota: z.number().int().min(0).max(100_000_000).optional(),
  budget: z.number().min(0).max(1e12).optional(),
  currency: z
    .string()
    .regex(/^[A-Z]{3}$/)
    .optional(),
  unitPrice: z.number().min(0).max(1e9).optional(),
  name: z.string().trim().min(1).max(200).optional(),
});
export type UpdateAccountInput = z.infer<typeof UpdateAccountInput>;

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
      if (await isEmailTaken(trx, input.adminEmail))
        throw new DomainError('already_exists', `A user with e-mail ${input.adminEmail} exists already.`);
      const accountId = newId();
      await insertAccount(trx, {
        id: accountId,
        name: input.name,
        quota: input.quota,
        budgetMinor: toMinor(input.budget),
        currency: input.currency,
        unitPriceMinor: toMinor(input.unitPrice),
        thresholds: input.thresholds ?? [80, 90, 100],
      });
      const adminUserId = newId();
      await insertUser(trx, { id: adminUserId, accountId, email: input.adminEmail, passwordHash, role: 'admin' });
      const key = await this.apiKeys.create(
        systemActor(accountId),
        { name: 'admin (created with the account)', role: 'admin' },
        trx,
      );
      return { accountId, adminUserId, apiKey: key.secret, apiKeyId: key.apiKey.id };
    });
  }

  async update(accountId: string, raw: UpdateAccountInput): Promise<Account> {
    const input = UpdateAccountInput.parse(raw);
    const found = await updateAccount(this.deps.knex, {
      id: accountId,
      patch: {
        quota: input.quota,
        budgetMinor: input.budget === undefined ? undefined : toMinor(input.budget),
        currency: input.currency,
        unitPriceMinor: input.unitPrice === undefined ? undefined : toMinor(input.unitPrice),
        name: input.name,
      },
    });
    if (!found) throw notFound('Account');
    return this.get(accountId);
  }

  async get(accountId: string): Promise<Account> {
    const account = await findAccount(this.deps.knex, accountId);
    if (!account) throw notFound('Account');
    return account;
  }

  async list(): Promise<Account[]> {
    return listAccounts(this.deps.knex);
  }

  async count(): Promise<number> {
    return countAccounts(this.deps.knex);
  }
}
