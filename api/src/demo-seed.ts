import type { Services } from '#core/services';
import { systemActor } from '#core/shared/actor';

export const DEMO_EMAIL = 'demo@fleet.local';
export const DEMO_PASSWORD = 'demo-password';

/** What a start says about the demo account, for main.ts to print. */
export type DemoAccount =
  /** Created by this start: the API key is shown this once. */
  | { kind: 'created'; email: string; password: string; apiKey: string }
  /**
   * Created by an earlier start whose output may never have been seen (that start failed on a
   * taken port, say): still the demo password, and no API key of it ever used.
   */
  | { kind: 'unused'; email: string; password: string; accountId: string };

/**
 * On the first start of an empty embedded database: a demo manufacturer to log in with, a
 * registered model, and an admin API key, printed by main.ts. Never runs on PostgreSQL.
 * app.ts calls it once the listeners are bound, so a start that fails on a port creates nothing.
 */
export async function seedDemoAccount(services: Services): Promise<DemoAccount | null> {
  if ((await services.accounts.count()) > 0) return unusedDemoAccount(services);
  const created = await services.accounts.create({
    name: 'Demo Lighting Co.',
    quota: 100_000,
    budget: 500_000,
    currency: 'EUR',
    unitPrice: 2.5,
    adminEmail: DEMO_EMAIL,
    adminPassword: DEMO_PASSWORD,
  });
  // The README's simulator walk-through claims devices of this model (`--model Luma-100`).
  await services.models.register(systemActor(created.accountId), {
    name: 'Luma-100',
    description: 'Demo LED luminaire module (simulated)',
  });
  return { kind: 'created', email: DEMO_EMAIL, password: DEMO_PASSWORD, apiKey: created.apiKey };
}

async function unusedDemoAccount(services: Services): Promise<DemoAccount | null> {
  const accountId = await services.users.accountWithPassword({ email: DEMO_EMAIL, password: DEMO_PASSWORD });
  if (!accountId) return null;
  const keys = await services.apiKeys.list(systemActor(accountId));
  if (keys.some((k) => k.lastUsedAt !== null)) return null;
  return { kind: 'unused', email: DEMO_EMAIL, password: DEMO_PASSWORD, accountId };
}
