import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Locator, Page } from 'playwright-core';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel, claimDevices, setReported } from '../helpers/factories';
import { uploadFirmware } from '../ota/ota-helpers';
import { ensurePortalBuilt, hasChromium, screenshot, skipReason, type Browser, openPortalAs } from './browser';
import { ifStarted } from '../helpers/teardown';
import { ManualClock } from '#core/shared/clock';
import { LuminaireIngest } from '#core/luminaire/luminaire-ingest';
import { recordReadings } from '../helpers/luminaire-harness';
import { createLogger } from '#core/logger';

if (!hasChromium) console.warn(`[fixture judgement e2e] skipped: ${skipReason}`);

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Also saves each screenshot into E2E_SHOTS_DIR when set (to look at them during development). */
async function shoot(page: Page, name: string, target?: Locator): Promise<void> {
  await screenshot(page, name);
  const dir = process.env.E2E_SHOTS_DIR;
  if (!dir) return;
  fs.mkdirSync(dir, { recursive: true });
  await page.waitForTimeout(300);
  const file = path.join(dir, `${name}.png`);
  if (target) await target.screenshot({ path: file, animations: 'disabled' });
  else await page.screenshot({ path: file, fullPage: true, animations: 'disabled' });
}

/**
 * Firmware judged by the fixtures in the portal (docs/fixture-health.md, docs/ota.md "Health
 * gate"): the firmware page's rates per version, a deployment page whose gate paused the rollout
 * with the evidence it recorded, a last batch compared with the model's baseline, and a device's
 * printable warranty evidence.
 *
 * The story, in UTC hours before T (the latest noon, so the days fall the same on every run):
 * six GW-10 fixtures on 1.0.0 derate once a day for six days; then 2.0.0 is deployed and three of
 * them run it for 48 hours, derating every hour, while the other three derate every 6 hours. Two
 * GW-20 fixtures are both updated (no control left: the gate compares with their own days before).
 */
describe.skipIf(!hasChromium)('firmware judged by the fixtures, in the portal', () => {
  const noon = new Date();
  noon.setUTCHours(12, 0, 0, 0);
  if (noon.getTime() > Date.now()) noon.setTime(noon.getTime() - DAY);
  const T = noon.getTime();
  const clock = new ManualClock(new Date(T - 217 * HOUR));
  const firstReading = T - 216 * HOUR;
  const deployedAt = T - 49 * HOUR;
  const canary = ['GA-1', 'GA-2', 'GA-3'];
  const control = ['GA-4', 'GA-5', 'GA-6'];
  const lastBatch = ['GB-1', 'GB-2'];
  let server: TestServer;
  let account: TestAccount;
  let browser: Browser;
  let page: Page;
  let base: string;
  let pausedId = '';
  let baselineId = '';

  beforeAll(async () => {
    ensurePortalBuilt();
    server = await startTestServer({ clock });
    base = server.service.httpUrl;
    const knex = server.service.database.knex;
    account = await server.createAccount({ quota: 20 });
    for (const model of ['GW-10', 'GW-20']) {
      await buildModel(account, model);
      for (const version of ['1.0.0', '2.0.0']) await uploadFirmware(account, { model, version, expectStatus: 201 });
    }
    await claimDevices(account, { serials: [...canary, ...control], model: 'GW-10' });
    await claimDevices(account, { serials: lastBatch, model: 'GW-20' });
    const all = [...canary, ...control, ...lastBatch];
    await setReported(knex, { accountId: account.accountId, serials: all, state: { firmware: '1.0.0' } });
    const rows = await knex<{ id: string; serial: string }>('devices').whereIn('serial', all).select('id', 'serial');
    const ids = new Map(rows.map((r) => [r.serial, r.id]));
    const ingest = new LuminaireIngest({
      deps: { knex, clock, logger: createLogger('silent') },
      partitions: server.service.services.luminairePartitions,
    });
    /** One reading per device at `at`: counters are running totals, as the drivers report them. */
    async function readings(at: number, values: (serial: string) => Record<string, unknown>): Promise<void> {
      clock.set(new Date(at).toISOString());
      const hours = (at - firstReading) / HOUR;
      const payloads: Record<string, Record<string, unknown>> = {};
      for (const serial of all)
        payloads[serial] = {
          at: clock.now().toISOString(),
          // 40 W for 12,000 hours before the story starts, then on all the time.
          source_on_s: (12_000 + hours) * 3600,
          energy_wh: 480_000 + hours * 40,
          gear_temp_c: 55,
          ...values(serial),
        };
      await recordReadings(ingest, clock, { accountId: account.accountId, ids, readings: payloads });
    }

    // Six days on 1.0.0: one derating a day each; GA-4 also sees two undervoltages (too few to mark).
    for (let day = 0; day < 6; day++)
      await readings(firstReading + day * DAY, (serial) => ({
        gear_thermal_derating: day,
        supply_undervoltage: serial === 'GA-4' ? Math.min(day, 2) : 0,
      }));

    clock.set(new Date(deployedAt).toISOString());
    const deploy = async (model: string) => {
      const res = await account.api.post('/api/v1/firmware/deploy', {
        firmware_version: '2.0.0',
        filter: { model },
        rollout: {
          fixture_signals: ['thermal_derating', 'supply_faults'],
          fixture_max_ratio: 1.5,
          fixture_min_device_days: 4,
        },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      return res.body.deployment_id as string;
    };
    pausedId = await deploy('GW-10');
    baselineId = await deploy('GW-20');
    // What the updated devices' heartbeats would report.
    await setReported(knex, {
      accountId: account.accountId,
      serials: [...canary, ...lastBatch],
      state: { firmware: '2.0.0' },
    });

    // 48 hourly readings: the canary derates every hour, control every 6 hours, the last batch once a day.
    for (let h = 1; h <= 48; h++)
      await readings(deployedAt + h * HOUR, (serial) => ({
        gear_thermal_derating:
          5 + (canary.includes(serial) ? h : control.includes(serial) ? Math.floor(h / 6) : Math.floor(h / 24)),
        supply_undervoltage: serial === 'GA-4' ? 2 : 0,
      }));
    clock.set(new Date(T).toISOString());
    await server.service.healthWorker.runNow();

    ({ browser, page } = await openPortalAs(base, account));
  }, 180_000);

  afterAll(async () => {
    await ifStarted(browser)?.close();
    await ifStarted(server)?.close();
  });

  it(
    'shows fixture rates per firmware version and marks the version that stands out',
    { timeout: 60_000 },
    async () => {
      await page.goto(`${base}/firmware?model=GW-10`);
      const card = page.getByTestId('firmware-rates');
      await card.locator('tbody tr').first().waitFor();
      const cell = (version: string, col: string) => card.locator(`tr[data-version="${version}"] [data-col="${col}"]`);
      expect(
        await card.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-version'))),
      ).toEqual(['1.0.0', '2.0.0']);
      // 1.0.0: six devices for six days, then control for three (two days before T to T's own): 45 device-days,
      // 30 deratings before the deployment and 8 each in control after it (54: 1,200 per 1,000 device-days).
      expect(await cell('1.0.0', 'devices').innerText()).toBe('6');
      expect(await cell('1.0.0', 'deviceDays').innerText()).toBe('45');
      expect(await cell('1.0.0', 'thermalDerating').innerText()).toBe('1,200');
      expect(await cell('1.0.0', 'supplyFaults').innerText()).toBe('44.4');
      // 2.0.0: the canary's three devices on three days, 48 deratings each: 144 in 9 device-days.
      expect(await cell('2.0.0', 'devices').innerText()).toBe('3');
      expect(await cell('2.0.0', 'deviceDays').innerText()).toBe('9');
      expect(await cell('2.0.0', 'thermalDerating').innerText()).toBe('16,000');
      expect(await cell('2.0.0', 'supplyFaults').innerText()).toBe('0');
      expect(await card.locator('td.outlier').evaluateAll((cells) => cells.length)).toBe(1);
      expect(await cell('2.0.0', 'thermalDerating').getAttribute('class')).toContain('outlier');
      expect(await cell('2.0.0', 'thermalDerating').getAttribute('title')).toMatch(
        /144 events: more than 2× the model's other versions/,
      );
      // Reboots and reconnects: "n/a" with a tooltip while the service does not measure them per version.
      const rest = await account.api.get('/api/v1/firmware-rates?model=GW-10');
      expect(rest.status).toBe(200);
      const restRow = rest.body.versions.find((v: { firmware: string }) => v.firmware === '2.0.0');
      for (const [col, key] of [
        ['unexpectedReboots', 'unexpected_reboots'],
        ['reconnects', 'reconnects'],
      ] as const) {
        if (restRow.per_1000_device_days[key] === null) {
          expect(await cell('2.0.0', col).innerText()).toBe('n/a');
          expect(await cell('2.0.0', col).getAttribute('title')).toMatch(/^Not measured/);
        } else expect(await cell('2.0.0', col).innerText()).not.toBe('n/a');
      }
      await shoot(page, 'firmware-rates', card);
    },
  );

  it("shows the gate's pause on the deployment page with the evidence it recorded", { timeout: 60_000 }, async () => {
    await page.goto(`${base}/deployments/${pausedId}`);
    const card = page.getByTestId('fixture-gate');
    const paused = card.getByTestId('gate-paused');
    await paused.waitFor();
    expect(await page.getByTestId('deployment-status').innerText()).toBe('paused');
    expect(await page.getByTestId('deployment-paused-reason').innerText()).toMatch(/^Paused by the health gate/);
    expect(await card.getByTestId('gate-gated').innerText()).toBe(
      'Watches thermal derating, supply faults: pauses when updated devices are above 1.5× control with 95 % confidence, once each group has 4 device-days.',
    );
    const header = await paused.locator('.n-alert-body__title').innerText();
    expect(header).toMatch(/^The health gate paused this rollout .+ \(.+\)$/);
    const gate = (await account.api.get(`/api/v1/deployments/${pausedId}/fixture-gate`)).body;
    expect(await paused.locator('time').first().getAttribute('datetime')).toBe(gate.recorded.paused_at);
    expect(await paused.getByTestId('gate-state').innerText()).toBe('Pause');
    expect(await paused.getByTestId('gate-summary').innerText()).toMatch(
      /^thermal derating: 24000 per 1,000 device-days updated against 4000 for not-yet-updated devices/,
    );
    // 48 hourly rows per device since the deployment: 6 device-days a group.
    const groups = await paused.getByTestId('gate-groups').innerText();
    expect(groups).toMatch(/Updated\s+3 devices · 6 device-days/);
    expect(groups).toMatch(/Control \(devices of the model not updated yet\)\s+3 devices · 6 device-days/);
    const derating = paused.locator('tr[data-signal="thermal_derating"]');
    expect(await derating.locator('[data-col="updated"]').innerText()).toBe('24,000 (144 events)');
    expect(await derating.locator('[data-col="control"]').innerText()).toBe('4,000 (24 events)');
    expect(await derating.locator('[data-col="ratio"]').innerText()).toBe('5.9');
    const recorded = gate.recorded.decision.signals.find((s: { signal: string }) => s.signal === 'thermal_derating');
    expect(await derating.locator('[data-col="lower-bound"]').innerText()).toBe(
      String(Math.round(recorded.ratio_lower_bound * 100) / 100),
    );
    expect(recorded.ratio_lower_bound).toBeGreaterThan(1.5);
    expect(await derating.locator('[data-col="verdict"]').innerText()).toBe('Worse');
    expect(await paused.locator('tr[data-signal="supply_faults"] [data-col="verdict"]').innerText()).toBe(
      'Too few events',
    );
    // No undervoltage in either group: no ratio to show (0.5 / 0.5 would read as one).
    expect(await paused.locator('tr[data-signal="supply_faults"] [data-col="ratio"]').innerText()).toBe('—');
    // Now, below the recorded evidence: the same comparison as it stands.
    expect(await card.getByTestId('gate-current').getByTestId('gate-state').innerText()).toBe('Pause');
    await card.scrollIntoViewIfNeeded();
    await shoot(page, 'deployment-gate-paused', card);
  });

  it('says when the last batch is compared with the model before the deployment', { timeout: 60_000 }, async () => {
    await page.goto(`${base}/deployments/${baselineId}`);
    const current = page.getByTestId('fixture-gate').getByTestId('gate-current');
    await current.getByTestId('gate-state').waitFor();
    expect(await page.getByTestId('fixture-gate').getByTestId('gate-paused').count()).toBe(0);
    expect(await current.locator('[data-compared-with]').getAttribute('data-compared-with')).toBe('baseline');
    expect(await current.getByTestId('gate-state').innerText()).toBe('Pass');
    expect(await current.getByTestId('gate-summary').innerText()).toBe(
      'No signal worse than 1.5× the model before the deployment.',
    );
    // Baseline: both devices' six days on 1.0.0 before the deployment.
    expect(await current.getByTestId('gate-groups').innerText()).toMatch(
      /Baseline \(the model before the deployment: too few devices left to compare with\)\s+2 devices · 12 device-days/,
    );
    expect(await current.locator('thead').innerText()).toContain('Baseline');
    expect(await current.locator('tr[data-signal="thermal_derating"] [data-col="verdict"]').innerText()).toBe(
      'Within ratio',
    );
    await page.getByTestId('fixture-gate').scrollIntoViewIfNeeded();
    await shoot(page, 'deployment-gate-baseline', page.getByTestId('fixture-gate'));
  });

  it("prints a device's warranty evidence, reached from its Health card", { timeout: 60_000 }, async () => {
    await page.goto(`${base}/devices/GA-1`);
    await page.getByTestId('device-health-state').waitFor();
    await page.getByTestId('device-health').scrollIntoViewIfNeeded();
    await shoot(page, 'device-health-warranty-link', page.getByTestId('device-health'));
    await page.getByTestId('device-warranty-link').click();
    await page.waitForURL(/\/devices\/GA-1\/warranty$/);
    const report = page.getByTestId('warranty-report');
    await report.waitFor();
    const fact = async (name: string) =>
      (await report.locator(`[data-fact="${name}"] dd`).innerText()).replace(/\s+/g, ' ').trim();
    expect(await fact('serial')).toBe('GA-1');
    expect(await fact('model')).toBe('GW-10');
    expect(await fact('claimed')).toBe(new Date(T - 217 * HOUR).toISOString().slice(0, 10));
    expect(await fact('generated')).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/);
    // The last reading, an hour before T: 215 hours after the first, 12,000 before it.
    expect(await fact('hours')).toBe('12,215 h');
    expect(await fact('energy')).toBe('488.6 kWh');
    expect(await fact('warranty')).toBe('5 years');
    const firmware = await report
      .getByTestId('warranty-firmware')
      .locator('tbody tr')
      .evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((c) => c.textContent.trim())));
    const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    expect(firmware).toContainEqual([
      '1.0.0',
      dayOf(firstReading),
      dayOf(firstReading + 5 * DAY),
      'luminaire readings',
    ]);
    expect(firmware).toContainEqual(['2.0.0', dayOf(deployedAt + HOUR), dayOf(T - HOUR), 'luminaire readings']);
    // Fault counters per month: 5 deratings on 1.0.0 and 48 on 2.0.0, over however many months the days span.
    const months = await report
      .getByTestId('warranty-faults')
      .locator('tbody tr')
      .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-month')));
    const expectedMonths = [...new Set([firstReading, T - HOUR].map((ms) => new Date(ms).toISOString().slice(0, 7)))];
    expect(months).toEqual(expectedMonths);
    const derating = await report
      .getByTestId('warranty-faults')
      .locator('[data-col="thermalDerating"]')
      .allInnerTexts();
    expect(derating.reduce((sum, n) => sum + Number(n.replace(/,/g, '')), 0)).toBe(53);
    await shoot(page, 'warranty-screen');

    // The Print button opens the browser's print dialog.
    await page.evaluate(() => {
      (window as unknown as { printed: number }).printed = 0;
      window.print = () => void ((window as unknown as { printed: number }).printed += 1);
    });
    await page.getByTestId('warranty-print').click();
    expect(await page.evaluate(() => (window as unknown as { printed: number }).printed)).toBe(1);

    // On paper: no navigation, header or buttons; black on white.
    expect(await page.locator('nav').isVisible()).toBe(true);
    // An A4 sheet at 96 dpi.
    await page.setViewportSize({ width: 794, height: 1123 });
    await page.emulateMedia({ media: 'print' });
    expect(await page.locator('nav').isVisible()).toBe(false);
    expect(await page.locator('.n-layout-header').isVisible()).toBe(false);
    expect(await page.getByTestId('warranty-print').isVisible()).toBe(false);
    expect(await report.locator('h1').evaluate((h) => getComputedStyle(h).color)).toBe('rgb(0, 0, 0)');
    expect(await report.locator('[data-fact="claimed"] dt').evaluate((h) => getComputedStyle(h).color)).toBe(
      'rgb(0, 0, 0)',
    );
    expect(await page.evaluate(() => getComputedStyle(document.body).backgroundColor)).toMatch(
      /^rgb\(255, 255, 255\)$|^rgba\(0, 0, 0, 0\)$/,
    );
    // Every column of the monthly counters fits the sheet.
    const faults = await report.getByTestId('warranty-faults').boundingBox();
    expect(faults!.x + faults!.width).toBeLessThanOrEqual(794);
    await shoot(page, 'warranty-print');
    await page.emulateMedia({ media: 'screen' });
    await page.setViewportSize({ width: 1366, height: 860 });

    // Leaving the page takes its print rules with it: the device page prints with the portal around it.
    await page.getByRole('link', { name: 'Back to the device' }).click();
    await page.waitForURL(/\/devices\/GA-1$/);
    await page.emulateMedia({ media: 'print' });
    expect(await page.locator('nav').isVisible()).toBe(true);
    await page.emulateMedia({ media: 'screen' });
    expect(browser.errors).toEqual([]);
  });
});
