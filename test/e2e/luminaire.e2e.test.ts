import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel, serials } from '../helpers/factories';
import { ensurePortalBuilt, hasChromium, launchBrowser, logIn, screenshot, skipReason, type Browser } from './browser';
import { ifStarted } from '../helpers/teardown';
import { LuminaireIngest } from '#core/luminaire/luminaire-ingest';
import { LuminaireModel } from '#simulator/luminaire-model';
import { createLogger } from '#core/logger';
import { systemClock } from '#core/shared/clock';

if (!hasChromium) console.warn(`[luminaire e2e] skipped: ${skipReason}`);

/**
 * Luminaire data in the portal (docs/luminaire-data.md): a week of simulated readings of four
 * fixtures of two models shows on the device page (power and temperatures, cumulative energy,
 * burn hours against rated life) and on the dashboard (fleet energy per day, by model).
 */
describe.skipIf(!hasChromium)('luminaire data in the portal', () => {
  let server: TestServer;
  let account: TestAccount;
  let browser: Browser;
  let page: Page;
  let base: string;
  const fixtures = serials('LUXE', 4);

  beforeAll(async () => {
    ensurePortalBuilt();
    server = await startTestServer();
    base = server.service.httpUrl;
    account = await server.createAccount({ quota: 10 });
    for (const model of ['LX-200', 'LX-400']) await buildModel(account, model);
    for (const [i, serial] of fixtures.entries())
      expect(
        (await account.api.post('/api/v1/devices/claim', { serial, model: i % 2 ? 'LX-400' : 'LX-200' })).status,
      ).toBe(201);
    // A week of readings every 15 minutes, as the simulator's luminaires send them (dated in the
    // past, so recorded through the ingest rather than over MQTT, where `at` must be recent).
    const ingest = new LuminaireIngest({
      deps: { knex: server.service.database.knex, clock: systemClock, logger: createLogger('silent') },
      partitions: server.service.services.luminairePartitions,
    });
    const devices = await server.service.database
      .knex('devices')
      .whereIn('serial', fixtures)
      .select<Array<{ id: string; serial: string }>>('id', 'serial');
    const start = Date.now() - 7 * 86_400_000;
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
    for (const [i, d] of devices.entries()) {
      const model = new LuminaireModel({
        random,
        ratedPowerW: i % 2 ? 75 : 40,
        timeZone: 'Europe/Berlin',
        driverReplacementPerDay: 0,
      });
      const pending: Array<Promise<void>> = [];
      for (let t = start; t < Date.now(); t += 900_000) {
        const { at, ...values } = model.read(new Date(t));
        pending.push(
          ingest.record({
            accountId: account.accountId,
            deviceId: d.id,
            serial: d.serial,
            values,
            at: new Date(at!),
            badClock: false,
            refused: [],
          }),
        );
      }
      await ingest.flush();
      await Promise.all(pending);
    }
    browser = await launchBrowser();
    page = await browser.newPage();
    await page.setViewportSize({ width: 1280, height: 1100 });
    await page.goto(`${base}/login`);
    await logIn(page, account.adminEmail, account.adminPassword);
    await page.waitForURL((url) => !url.pathname.startsWith('/login'));
  }, 180_000);

  afterAll(async () => {
    await ifStarted(browser)?.close();
    await ifStarted(server)?.close();
  });

  it(
    'shows power, temperatures, cumulative energy and burn hours on the device page',
    { timeout: 60_000 },
    async () => {
      await page.goto(`${base}/devices/${fixtures[0]}`);
      const card = page.getByTestId('device-luminaire');
      await card.scrollIntoViewIfNeeded();
      await card.getByTestId('luminaire-power-chart').locator('canvas').first().waitFor({ timeout: 20_000 });
      await card.getByTestId('luminaire-energy-chart').locator('canvas').first().waitFor();
      expect(await card.getByTestId('luminaire-burn-hours').innerText()).toMatch(/h of 100,000 h rated/);
      expect(await card.getByTestId('luminaire-lifetime-energy').innerText()).toMatch(/kWh$/);
      await page.getByRole('radio', { name: '24 hours' }).check({ force: true });
      await card.getByTestId('luminaire-power-chart').locator('canvas').first().waitFor();
      await page.getByRole('radio', { name: '7 days' }).check({ force: true });
      await card.evaluate((el) => el.scrollIntoView({ block: 'start' }));
      await screenshot(page, 'device-luminaire');
    },
  );

  it('shows fleet energy per day stacked by model on the dashboard', { timeout: 60_000 }, async () => {
    await page.goto(`${base}/`);
    const energy = page.getByTestId('card-energy');
    await energy.scrollIntoViewIfNeeded();
    const chart = energy.getByRole('img', { name: /^Fleet energy per day by model/ });
    await chart.waitFor({ timeout: 20_000 });
    expect(await chart.getAttribute('aria-label')).toMatch(/^Fleet energy per day by model: \d+\.\d kWh in 30 days$/);
    // Readings but no health pass yet: the Maintenance card must not say the fleet is fine.
    await expect.poll(() => page.getByTestId('card-maintenance').innerText()).toContain('No fixture judged yet');
    await energy.evaluate((el) => el.scrollIntoView({ block: 'center' }));
    await screenshot(page, 'dashboard-energy');
  });
});
