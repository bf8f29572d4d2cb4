import type { Services } from './services';
import { systemActor } from './domain/shared/actor';

export const DEMO_EMAIL = 'demo@fleet.local';
export const DEMO_PASSWORD = 'demo-password';

/**
 * On the first start of an empty embedded database: a demo manufacturer to log in with, a
 * registered model, and an admin API key, printed by main.ts. Never runs on PostgreSQL.
 */
export async function seedDemoAccount(services: Services): Promise<{ email: string; password: string; apiKey: string } | null> {
  if ((await services.accounts.count()) > 0) return null;
  const created = await services.accounts.create({
    name: 'Demo Lighting Co.',
    quota: 100_000,
    budget: 500_000,
    currency: 'EUR',
    unitPrice: 2.5,
    adminEmail: DEMO_EMAIL,
    adminPassword: DEMO_PASSWORD,
  });
  // The simulator's README walk-through claims devices of this model (`--model Luma-100`).
  await services.models.register(systemActor(created.accountId), { name: 'Luma-100', description: 'Demo LED luminaire module (simulated)' });
  return { email: DEMO_EMAIL, password: DEMO_PASSWORD, apiKey: created.apiKey };
}
