import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { ensurePortalBuilt, hasChromium, screenshot, skipReason, type Browser, openPortalAs } from './browser';
import { ifStarted } from '../helpers/teardown';
import { ManualClock } from '#core/shared/clock';
import { LuminaireIngest } from '#core/luminaire/luminaire-ingest';
import { recordReadings } from '../helpers/luminaire-harness';
import { createLogger } from '#core/logger';

if (!hasChromium) console.warn(`[health e2e] skipped: ${skipReason}`);

/**
 * Fixture health in the portal (docs/fixture-health.md): the device page's Health card shows the
 * state and its reasons in words, and the dashboard's Maintenance card counts devices per state
 * and links the most urgent ones.
 */
describe.skipIf(!hasChromium)('fixture health in the portal', () => {
  // Today, held still: seven days of readings end now, and the portal's relative times read true.
  const clock = new ManualClock(new Date());
  const now = clock.now().getTime();
  let server: TestServer;
  let account: TestAccount;
  let browser: Browser;
  let page: Page;
  let base: string;

  beforeAll(async () => {
    ensurePortalBuilt();
    server = await startTestServer({ clock });
    base = server.service.httpUrl;
    account = await server.createAccount({ quota: 10 });
    await buildModel(account, 'LX-200');
    const serials = ['HEALTH-HOT', 'HEALTH-DEAD', 'HEALTH-FINE'];
    const claim = await account.api.post('/api/v1/devices/claim', { serials, model: 'LX-200' });
    expect(claim.status).toBe(201);
    const rows: Array<{ id: string; serial: string }> = await server.service.database
      .knex('devices')
      .whereIn('serial', serials)
      .select('id', 'serial');
    const ids = new Map(rows.map((r) => [r.serial, r.id]));
    const ingest = new LuminaireIngest({
      deps: { knex: server.service.database.knex, clock, logger: createLogger('silent') },
      partitions: server.service.services.luminairePartitions,
    });
    // Seven days: HOT derates 12 times a day (72 after its first reading: 10.3 a day) and runs hot; DEAD fails its light source on day 5; FINE is quiet.
    for (let day = 0; day < 7; day++) {
      clock.set(new Date(now - (6 - day) * 86_400_000).toISOString());
      const values: Record<string, Record<string, unknown>> = {
        'HEALTH-HOT': { gear_thermal_derating: 12 * (day + 1), gear_temp_c: 80 + day, source_on_s: 20_000 * 3600 },
        'HEALTH-DEAD': { source_failures: day >= 5 ? 1 : 0, gear_temp_c: 50, source_on_s: 30_000 * 3600 },
        'HEALTH-FINE': { gear_thermal_derating: 0, gear_temp_c: 45, source_on_s: 1000 * 3600 },
      };
      const readings = Object.fromEntries(
        Object.entries(values).map(([serial, payload]) => [serial, { at: clock.now().toISOString(), ...payload }]),
      );
      await recordReadings(ingest, clock, { accountId: account.accountId, ids, readings });
    }
    clock.set(new Date(now).toISOString());
    await server.service.healthWorker.runNow();
    ({ browser, page } = await openPortalAs(base, account));
  }, 120_000);

  afterAll(async () => {
    await ifStarted(browser)?.close();
    await ifStarted(server)?.close();
  });

  it("shows a device's health state and its reasons on the device page", { timeout: 60_000 }, async () => {
    await page.goto(`${base}/devices/HEALTH-HOT`);
    const card = page.getByTestId('device-health');
    await card.getByTestId('device-health-state').waitFor();
    expect(await card.getByTestId('device-health-state').innerText()).toBe('Replace soon');
    const reasons = await card.getByTestId('device-health-reasons').locator('li').allInnerTexts();
    expect(reasons).toHaveLength(2);
    expect(reasons[0]).toMatch(/Replace soon\s+Thermal derating 10.3 times a day over 7 days \(limit 10\)/);
    expect(reasons[1]).toMatch(/Watch\s+Driver reached 86 °C in the last 7 days \(limit 75 °C\)/);
    await card.scrollIntoViewIfNeeded();
    await screenshot(page, 'device-health');

    await page.goto(`${base}/devices/HEALTH-FINE`);
    await page.getByTestId('device-health-state').waitFor();
    expect(await page.getByTestId('device-health-state').innerText()).toBe('OK');
    await page.getByText('Nothing past a threshold.').waitFor();
  });

  it('counts devices per state on the dashboard and links the most urgent ones', { timeout: 60_000 }, async () => {
    await page.goto(`${base}/`);
    const card = page.getByTestId('card-maintenance');
    await card.locator('tr[data-serial]').first().waitFor();
    const count = (state: string) => card.locator(`.count[data-state="${state}"] .n`).innerText();
    expect([await count('ok'), await count('watch'), await count('replace_soon'), await count('failed')]).toEqual([
      '1',
      '0',
      '1',
      '1',
    ]);
    expect(
      await card.locator('tr[data-serial]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-serial'))),
    ).toEqual(['HEALTH-DEAD', 'HEALTH-HOT']);
    expect(await card.locator('tr[data-serial="HEALTH-DEAD"]').innerText()).toContain('Light source failed 1 time in');
    await card.scrollIntoViewIfNeeded();
    await screenshot(page, 'dashboard-maintenance');
    await card.getByRole('link', { name: 'HEALTH-DEAD' }).click();
    await page.waitForURL(/\/devices\/HEALTH-DEAD$/);
    await page.getByTestId('device-health-state').waitFor();
    expect(await page.getByTestId('device-health-state').innerText()).toBe('Failed');
  });
});
