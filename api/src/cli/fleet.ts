import { parseArgs } from 'node:util';
import { ConfigurationError, loadConfig } from '#core/config';
import { createLogger } from '#core/logger';
import { openDatabase } from '#core/db/database';
import { createTransactionRunner } from '#core/db/transaction';
import { systemClock } from '#core/shared/clock';
import { createServices, type Services } from '#core/services';
import { systemActor } from '#core/shared/actor';
import { DomainError } from '#core/shared/errors';
import { ZodError } from 'zod';
import { fromMinor } from '#core/accounts/money';

const USAGE = `fleet: the operator's tool (works on DATABASE_URL, or the embedded database in DATA_DIR)

  fleet account create --name N --quota Q --budget B --currency C --unit-price P
                       --admin-email E --admin-password W [--json]
  fleet account list [--json]
  fleet account update --account ID [--name N] [--quota Q] [--budget B] [--currency C] [--unit-price P] [--json]
  fleet user create --account ID --email E --password W [--role admin|viewer] [--json]
  fleet api-key create --account ID --name N [--role admin|viewer] [--json]
  fleet api-key rate-limit --key ID (--per-minute N | --reset)
  fleet prune [--json]        delete history and events past their retention
                              (HISTORY_RETENTION_DAYS, EVENT_RETENTION_DAYS) now
  fleet migrate
`;

const OPTIONS = {
  name: { type: 'string' },
  quota: { type: 'string' },
  budget: { type: 'string' },
  currency: { type: 'string' },
  'unit-price': { type: 'string' },
  'admin-email': { type: 'string' },
  'admin-password': { type: 'string' },
  account: { type: 'string' },
  email: { type: 'string' },
  password: { type: 'string' },
  role: { type: 'string' },
  key: { type: 'string' },
  'per-minute': { type: 'string' },
  reset: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

const num = (value: string | undefined, flag: string): number | undefined => {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n)) throw new UsageError(`--${flag} must be a number`);
  return n;
};
const required = (value: string | undefined, flag: string): string => {
  if (value === undefined || value === '') throw new UsageError(`--${flag} is required`);
  return value;
};

class UsageError extends Error {}

const COMMANDS = [
  'account create',
  'account list',
  'account update',
  'user create',
  'api-key create',
  'api-key rate-limit',
  'prune',
  'migrate',
];

async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true });
  const command = positionals.join(' ');
  if (values.help || !command) {
    process.stdout.write(USAGE);
    return values.help ? 0 : 2;
  }
  if (!COMMANDS.includes(command)) throw new UsageError(`unknown command "${command}"`);
  const config = loadConfig();
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    embeddedThread: config.embeddedDatabaseThread,
    poolSize: 2,
  });
  try {
    await database.migrate();
    const logger = createLogger('warn');
    const services = createServices(
      {
        knex: database.knex,
        transaction: createTransactionRunner(database.knex, () => undefined),
        clock: systemClock,
        logger,
      },
      { retention: { historyDays: config.historyRetentionDays, eventDays: config.eventRetentionDays } },
    );
    if (command === 'migrate') {
      print(values, { migrated: true }, 'Migrations are up to date.');
      return 0;
    }
    return await dispatch(command, values, services);
  } finally {
    await database.close();
  }
}

async function dispatch(command: string, values: Values, services: Services): Promise<number> {
  switch (command) {
    case 'account create': {
      const created = await services.accounts.create({
        name: required(values.name, 'name'),
        quota: num(required(values.quota, 'quota'), 'quota')!,
        budget: num(required(values.budget, 'budget'), 'budget')!,
        currency: required(values.currency, 'currency'),
        unitPrice: num(required(values['unit-price'], 'unit-price'), 'unit-price')!,
        adminEmail: required(values['admin-email'], 'admin-email'),
        adminPassword: required(values['admin-password'], 'admin-password'),
      });
      print(
        values,
        {
          account_id: created.accountId,
          admin_user_id: created.adminUserId,
          api_key_id: created.apiKeyId,
          api_key: created.apiKey,
        },
        `Account ${created.accountId} created.\nAdmin API key (shown once): ${created.apiKey}`,
      );
      return 0;
    }
    case 'account list': {
      const accounts = await services.accounts.list();
      const rows = accounts.map((a) => ({
        account_id: a.id,
        name: a.name,
        quota: a.quota,
        budget: fromMinor(a.budgetMinor),
        currency: a.currency,
        unit_price: fromMinor(a.unitPriceMinor),
      }));
      print(
        values,
        { accounts: rows },
        rows.map((r) => `${r.account_id}  ${r.name}  quota ${r.quota}  budget ${r.budget} ${r.currency}`).join('\n') ||
          'No accounts.',
      );
      return 0;
    }
    case 'account update': {
      const a = await services.accounts.update(required(values.account, 'account'), {
        name: values.name,
        quota: num(values.quota, 'quota'),
        budget: num(values.budget, 'budget'),
        currency: values.currency,
        unitPrice: num(values['unit-price'], 'unit-price'),
      });
      print(
        values,
        {
          account_id: a.id,
          quota: a.quota,
          budget: fromMinor(a.budgetMinor),
          currency: a.currency,
          unit_price: fromMinor(a.unitPriceMinor),
        },
        `Account ${a.id} updated.`,
      );
      return 0;
    }
    case 'user create': {
      const user = await services.users.create(systemActor(required(values.account, 'account')), {
        email: required(values.email, 'email'),
        password: required(values.password, 'password'),
        role: (values.role as 'admin' | 'viewer' | undefined) ?? 'viewer',
      });
      print(
        values,
        { user_id: user.id, email: user.email, role: user.role },
        `User ${user.email} (${user.role}) created.`,
      );
      return 0;
    }
    case 'api-key create': {
      const accountId = required(values.account, 'account');
      await services.accounts.get(accountId);
      const { apiKey, secret } = await services.apiKeys.create(systemActor(accountId), {
        name: required(values.name, 'name'),
        role: (values.role as 'admin' | 'viewer' | undefined) ?? 'viewer',
      });
      print(
        values,
        { api_key_id: apiKey.id, api_key: secret, role: apiKey.role },
        `API key ${apiKey.id} (${apiKey.role}) created: ${secret}`,
      );
      return 0;
    }
    case 'api-key rate-limit': {
      const id = required(values.key, 'key');
      const perMinute = values.reset ? null : num(required(values['per-minute'], 'per-minute'), 'per-minute')!;
      if (perMinute !== null && (!Number.isInteger(perMinute) || perMinute < 1))
        throw new UsageError('--per-minute must be a positive whole number');
      await services.apiKeys.setRateLimit(id, perMinute);
      print(
        values,
        { api_key_id: id, rate_limit_per_minute: perMinute ?? 100 },
        `Key ${id}: ${perMinute ?? 100} requests per minute.`,
      );
      return 0;
    }
    case 'prune': {
      const result = await services.retention.pruneOnce();
      const lines = Object.entries(result).map(([table, rows]) => `  ${table}: ${rows}`);
      print(values, result, `Rows deleted:\n${lines.join('\n')}`);
      return 0;
    }
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

function print(values: Values, json: unknown, text: string): void {
  process.stdout.write(values.json ? JSON.stringify(json) + '\n' : text + '\n');
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof UsageError) process.stderr.write(`fleet: ${error.message}\n\n${USAGE}`);
    else if (error instanceof ZodError)
      process.stderr.write(
        `fleet: invalid input:\n${error.issues.map((i) => `  --${i.path.join('.')}: ${i.message}`).join('\n')}\n`,
      );
    else if (error instanceof DomainError) process.stderr.write(`fleet: ${error.message}\n`);
    else if (error instanceof ConfigurationError)
      for (const line of error.lines) process.stderr.write(`fleet: ${line}\n`);
    else process.stderr.write(`fleet: ${(error as Error).message}\n`);
    process.exit(error instanceof UsageError ? 2 : 1);
  },
);
