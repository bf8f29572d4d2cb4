import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel, serials } from '../helpers/factories';
import { ensurePortalBuilt, hasChromium, screenshot, skipReason, type Browser, openPortalAs } from './browser';
import { ifStarted } from '../helpers/teardown';

if (!hasChromium) console.warn(`[sites e2e] skipped: ${skipReason}`);

/**
 * Sites in the portal: an admin adds a building in its own time zone with a local maintenance
 * window and a freeze, moves a device into it from the device page, and finds the building's
 * devices through the device list's site filter.
 */
describe.skipIf(!hasChromium)('sites in the portal', () => {
  let server: TestServer;
  let account: TestAccount;
  let browser: Browser;
  let page: Page;
  let base: string;

  beforeAll(async () => {
    ensurePortalBuilt();
    server = await startTestServer();
    base = server.service.httpUrl;
    account = await server.createAccount({ quota: 10 });
    await buildModel(account, 'LX-200');
    const claim = await account.api.post('/api/v1/devices/claim', { serials: serials('SITE', 3), model: 'LX-200' });
    expect(claim.status).toBe(201);
    ({ browser, page } = await openPortalAs(base, account));
  }, 120_000);

  afterAll(async () => {
    await ifStarted(browser)?.close();
    await ifStarted(server)?.close();
  });

  it('adds a site with its zone, window and a freeze, and lists it', { timeout: 60_000 }, async () => {
    await page.getByRole('link', { name: 'Sites' }).first().click();
    await page.waitForURL(/\/sites$/);
    await page.getByLabel('Name').fill('Tokyo Tower Office');
    await page.locator('#site-zone').fill('Asia/Tokyo');
    await page.keyboard.press('Enter');
    await page.getByLabel('Address').fill('4-2-8 Shibakoen, Minato');
    await page.getByLabel('Window start (HH:MM)').fill('01:00');
    await page.getByLabel('Window end (HH:MM)').fill('04:00');
    await page.getByRole('button', { name: 'Add freeze' }).click();
    await page.getByLabel('Freeze 1 from').fill('2026-12-28T00:00');
    await page.getByLabel('Freeze 1 to').fill('2027-01-04T08:00');
    await page.getByLabel('Freeze 1 reason').fill('New Year closure');
    await page.getByRole('button', { name: 'Add site' }).click();
    const row = page.locator('tr', { hasText: 'Tokyo Tower Office' });
    await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(1);
    const text = await row.innerText();
    expect(text).toContain('Asia/Tokyo');
    expect(text).toContain('01:00–04:00');
    expect(text).toContain('2026-12-28 00:00 → 2027-01-04 08:00 (New Year closure)');
    // The API sees what the form saved.
    const listed = (await account.api.get('/api/v1/sites')).body.sites;
    expect(listed).toMatchObject([
      { name: 'Tokyo Tower Office', time_zone: 'Asia/Tokyo', maintenance_window: { start: '01:00', end: '04:00' } },
    ]);
    await screenshot(page, 'sites');
  });

  it(
    'moves a device into the site from its page, and filters the device list by site',
    { timeout: 60_000 },
    async () => {
      const [serial] = serials('SITE', 1);
      await page.goto(`${base}/devices/${serial}`);
      await page.getByText('Not assigned to a site.').waitFor();
      await page.getByLabel('Site of this device').click();
      await page.getByText('Tokyo Tower Office (Asia/Tokyo)').click();
      await page.getByRole('button', { name: 'Save site' }).click();
      await page.getByRole('link', { name: 'Tokyo Tower Office' }).waitFor();
      expect((await account.api.get(`/api/v1/devices/${serial}`)).body.site).toMatchObject({
        name: 'Tokyo Tower Office',
      });
      await page.getByRole('link', { name: 'Tokyo Tower Office' }).click();
      await page.waitForURL(/\/devices\?.*site=/);
      await expect
        .poll(() => page.locator('a', { hasText: /^SITE-/ }).allInnerTexts(), { timeout: 10_000 })
        .toEqual([serial]);
    },
  );
});
