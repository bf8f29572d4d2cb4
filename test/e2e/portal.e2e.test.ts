import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel, serials } from '../helpers/factories';
import mqtt from 'mqtt';
import { topics } from '#protocol/topics';
import { claimForMqtt, deviceOptions, type DeviceCreds } from '../helpers/mqtt';
import { gql, login } from '../graphql/graphql-client';
import { newSigningKey, signFirmware, uploadFirmware } from '../ota/ota-helpers';
import { makeCsr } from '../helpers/certificates';
import { SimulatedDevice } from '#simulator/simulated-device';
import { ensurePortalBuilt, hasChromium, launchBrowser, logIn, screenshot, skipReason, type Browser } from './browser';
import { colourDistance, gridColumns, overlaps, paintedTextColour, rgb, within } from './layout-checks';
import { ifStarted } from '../helpers/teardown';
import { scaledReconnectPolicy } from '#simulator/reconnect-backoff';

if (!hasChromium) console.warn(`[portal e2e] skipped: ${skipReason}`);

/**
 * The portal in Debian's Chromium against a real server with simulated MQTT devices.
 * One server, one browser and one story (admin, then viewer), to stay fast.
 */
describe.skipIf(!hasChromium)('portal in Chromium', () => {
  let server: TestServer;
  let account: TestAccount;
  let browser: Browser;
  let page: Page;
  let base: string;
  const simulated: SimulatedDevice[] = [];
  let lx200: DeviceCreds[];
  let lx300: DeviceCreds[];
  /** LX-200 1.0.0's image: signed in the portal once a signing key is registered. */
  const lx200First = randomBytes(2048);
  /** Reads go through a portal session: sessions are not rate limited like API keys. */
  let adminCookie = '';

  const simulate = async (creds: DeviceCreds, firmware = '1.0.0') => {
    const device = new SimulatedDevice({
      credentials: creds,
      brokerUrl: server.service.mqttUrl!,
      firmware,
      heartbeatS: 2,
      rebootMs: 200,
      reconnect: scaledReconnectPolicy(0.25),
    });
    simulated.push(device);
    await device.start();
    return device;
  };
  const summary = async () =>
    (await gql(base, '{ fleetSummary { total online offline updating provisioned quota } }', {
      cookie: adminCookie,
    }).then((r) => r.body.data?.fleetSummary ?? Promise.reject(new Error(JSON.stringify(r.body))))) as {
      total: number;
      online: number;
      offline: number;
      provisioned: number;
      quota: number;
    };

  beforeAll(async () => {
    ensurePortalBuilt();
    server = await startTestServer();
    base = server.service.httpUrl;
    account = await server.createAccount({ quota: 40, budget: 1000, unitPrice: 10 });
    adminCookie = (await login(base, account.adminEmail, account.adminPassword)).cookie;
    // Real binaries for both models' 1.0.0, so a rollback can download them again.
    await buildModel(account, 'LX-200', 'Linear fixture');
    await buildModel(account, 'LX-300', 'Spot');
    await uploadFirmware(account, { model: 'LX-200', version: '1.0.0', bytes: lx200First, expectStatus: 201 });
    await uploadFirmware(account, { model: 'LX-300', version: '1.0.0', bytes: randomBytes(2048), expectStatus: 201 });
    lx200 = await claimForMqtt(server, account, serials('LUM', 8), { model: 'LX-200', firmware: '1.0.0' });
    lx300 = await claimForMqtt(server, account, serials('SPOT', 3), { model: 'LX-300', firmware: '1.0.0' });
    // Six LX-200 online; the other devices stay offline until a test brings one up.
    for (const creds of lx200.slice(0, 6)) await simulate(creds);
    for (let i = 0; i < 50 && (await summary()).online < 6; i++) await new Promise((r) => setTimeout(r, 200));
    browser = await launchBrowser();
    page = await browser.newPage();
  }, 120_000);

  afterAll(async () => {
    await ifStarted(browser)?.close();
    await Promise.all(simulated.map((d) => d.stop()));
    await ifStarted(server)?.close();
  });

  it('refuses a wrong password with a clear message, then logs in and returns to the deep link asked for', async () => {
    await page.goto(`${base}/devices?status=online`);
    await page.waitForURL(/\/login\?next=/);
    // Real placeholders, never the UI library's "Please Input".
    expect(await page.getByLabel('Password').getAttribute('placeholder')).toBe('Your password');
    expect(await page.locator('[placeholder^="Please "]').count()).toBe(0);
    expect(await page.getByText(/^Please (Input|Select)$/).count()).toBe(0);
    // Motion is off in these tests (browser.ts), so no click lands on a button still moving.
    const logInButton = page.getByRole('button', { name: 'Log in' });
    expect(await logInButton.evaluate((el) => getComputedStyle(el).transitionDuration)).toMatch(/^0s(, 0s)*$/);
    await screenshot(page, 'login');
    await logIn(page, account.adminEmail, 'wrong password');
    await expect.poll(() => page.getByTestId('login-error').textContent()).toContain('not correct');
    await logIn(page, account.adminEmail, account.adminPassword);
    await page.waitForURL((url) => url.pathname === '/devices' && url.searchParams.get('status') === 'online');
    await page.locator('[data-serial="LUM-0001"]').waitFor();
    expect(await page.getByTestId('current-role').textContent()).toBe('admin');
  });

  it('dashboard figures equal the API, and a device coming online changes the dashboard and the list without a reload', async () => {
    await page.goto(`${base}/`);
    await page.getByTestId('stat-total').waitFor();
    const before = await summary();
    expect(Number(await page.getByTestId('stat-total').textContent())).toBe(before.total);
    expect(Number(await page.getByTestId('stat-online').textContent())).toBe(before.online);
    expect(Number(await page.getByTestId('stat-offline').textContent())).toBe(before.offline);
    expect(await page.getByTestId('gauge-allowance').getByTestId('gauge-used').textContent()).toContain(
      String(before.provisioned),
    );
    await screenshot(page, 'dashboard');

    // A second tab shows the device list; both must change live when LUM-0007 connects.
    const list = await browser.context.newPage();
    await list.goto(`${base}/devices?q=LUM-0007`);
    const cell = list.locator('[data-serial="LUM-0007"] [data-col="status"] [data-status]');
    await expect.poll(() => cell.getAttribute('data-status')).toBe('offline');

    await simulate(lx200[6]!);
    await expect
      .poll(() => page.getByTestId('stat-online').textContent(), { timeout: 10_000 })
      .toBe(String(before.online + 1));
    await expect.poll(() => cell.getAttribute('data-status'), { timeout: 10_000 }).toBe('online');
    await expect.poll(async () => (await summary()).online).toBe(before.online + 1);
    await list.close();
  });

  it('filters live in the URL: deep links and reloads show the same list, and typing a search updates the URL', async () => {
    await page.goto(`${base}/devices?model=LX-300`);
    await page.locator('[data-serial="SPOT-0001"]').waitFor();
    const rows = () =>
      page.locator('[data-serial]').evaluateAll((els) => els.map((e) => e.getAttribute('data-serial')));
    expect((await rows()).sort()).toEqual(lx300.map((c) => c.serial).sort());
    await page.reload();
    await page.locator('[data-serial="SPOT-0001"]').waitFor();
    expect((await rows()).sort()).toEqual(lx300.map((c) => c.serial).sort());

    await page.goto(`${base}/devices?model=LX-200&status=offline`);
    await page.locator('[data-serial="LUM-0008"]').waitFor();
    expect(await rows()).toEqual(['LUM-0008']);

    await page.goto(`${base}/devices`);
    await page.getByLabel('Search serial or name').fill('SPOT-0002');
    await page.waitForURL(/q=SPOT-0002/);
    await expect.poll(rows).toEqual(['SPOT-0002']);
    await page.goto(`${base}/devices`);
    await page.locator('[data-serial="LUM-0001"]').waitFor();
    await screenshot(page, 'devices');

    // Keyboard: the column headers are buttons; Enter on "Device name" sorts by name, again reverses.
    await page.locator('button[data-sort="name"]').focus();
    await page.keyboard.press('Enter');
    await page.waitForURL(/sort=name/);
    await page.keyboard.press('Enter');
    await page.waitForURL(/sort=-name/);
    await expect.poll(async () => (await rows())[0]).toBe('SPOT-0003');

    // Tablet (portrait): the list and its filters fit the width, no sideways scrolling of the page.
    await page.setViewportSize({ width: 820, height: 1180 });
    await page.goto(`${base}/devices?model=LX-200`);
    await page.locator('[data-serial="LUM-0001"]').waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    await screenshot(page, 'devices-tablet');
    await page.setViewportSize({ width: 1366, height: 860 });
  });

  it('at 800 px the device list keeps its headers and the IP column apart; links take the theme colour; Deployments has its own menu entry', async () => {
    /** App.vue's primary colour; the browser's link blue is (0, 0, 238), visited purple (85, 26, 139). */
    const theme = [31, 122, 77];
    await page.setViewportSize({ width: 800, height: 900 });
    try {
      await page.goto(`${base}/devices?model=LX-200`);
      await page.locator('[data-serial="LUM-0001"]').waitFor();
      // A page load of LUM-0001 from the list: its link is :visited afterwards.
      await page.evaluate(() => window.location.assign('/devices/LUM-0001'));
      await page.getByTestId('device-config').waitFor();
      await page.goBack();
      const ipCell = page.locator('[data-serial="LUM-0001"] [data-col="ip"]');
      await expect.poll(() => ipCell.textContent(), { timeout: 10_000 }).toMatch(/\d+\.\d+\.\d+\.\d+/);
      const columns = (await gridColumns(page.getByTestId('device-table'))).filter((c) => c.key !== null);
      const ip = columns.find((c) => c.key === 'ip');
      expect(ip, 'the IP column is shown at 800 px').toBeDefined();
      // The IP header and its cells are one column, and the address fits in it.
      expect(Math.abs(ip!.header.left - ip!.cell.left)).toBeLessThanOrEqual(1);
      expect(Math.abs(ip!.header.right - ip!.cell.right)).toBeLessThanOrEqual(1);
      expect(within(ip!.cellText, ip!.cellRoom), 'the IP address fits its cell').toBe(true);
      // No header spills over a neighbour: each fits its own cell, none touches the IP column's text.
      for (const c of columns) {
        expect(within(c.headerText, c.headerRoom), `header "${c.label}" fits its column`).toBe(true);
        if (c !== ip) expect(overlaps(c.headerText, ip!.headerText) || overlaps(c.cellText, ip!.cellText)).toBe(false);
      }
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);

      // Links: the theme colour (visited too: read from the painted pixels, which a page's
      // getComputedStyle never tells), underlined only under the pointer.
      const link = page.locator('[data-serial="LUM-0001"] [data-col="name"] a');
      expect(colourDistance(await paintedTextColour(page, link), theme)).toBeLessThan(40);
      expect(await link.evaluate((a) => getComputedStyle(a).textDecorationLine)).toBe('none');
      await link.hover();
      await expect.poll(() => link.evaluate((a) => getComputedStyle(a).textDecorationLine)).toBe('underline');
      await page.goto(`${base}/deployments`);
      const tableLink = page.getByTestId('deployments-table').locator('tbody a').first();
      await tableLink.waitFor();
      expect(colourDistance(rgb(await tableLink.evaluate((a) => getComputedStyle(a).color)), theme)).toBeLessThan(2);
      expect(await tableLink.evaluate((a) => getComputedStyle(a).textDecorationLine)).toBe('none');
    } finally {
      await page.setViewportSize({ width: 1366, height: 860 });
    }
    // Deployments live at /deployments, and the menu has them as an entry of their own.
    await page.goto(`${base}/deployments`);
    // Top-level entries are the menu's own menuitems; groups (Settings) are submenus.
    const topLevel = page.locator('nav .n-menu > [role=menuitem]');
    await expect
      .poll(() => topLevel.allTextContents())
      .toEqual(['Dashboard', 'Devices', 'Sites', 'Firmware', 'Deployments']);
    expect(await topLevel.locator('a[href="/deployments"][aria-current="page"]').count()).toBe(1);
    expect(await page.locator('nav .n-submenu a[href="/deployments"]').count()).toBe(0);
  });

  it('a configuration edit reaches the simulated device and shows as applied', async () => {
    await page.goto(`${base}/devices/LUM-0001`);
    await page.getByRole('button', { name: 'Edit configuration' }).click();
    const dim = page.getByLabel('Dim level (%)');
    await dim.fill('40');
    await page.getByLabel('Maintenance window start').fill('25:00');
    await page.getByRole('button', { name: 'Save configuration' }).click();
    // Validated like the API before anything is sent.
    await page.getByText('HH:MM, e.g. 02:00').waitFor();
    await page.getByLabel('Maintenance window start').fill('02:00');
    await page.getByLabel('Maintenance window end').fill('05:00');
    await page.getByRole('button', { name: 'Save configuration' }).click();
    await expect.poll(() => page.getByTestId('config-sync').textContent(), { timeout: 10_000 }).toContain('in sync');
    await expect.poll(() => page.locator('[data-config="dimLevel"] [data-col="reported"]').textContent()).toBe('40');
    const device = simulated.find((d) => d.serial === 'LUM-0001')!;
    expect(device.config.dim_level).toBe(40);
    await page
      .getByTestId('device-history')
      .getByText(/config/i)
      .first()
      .waitFor();
    await screenshot(page, 'device');
  });

  it('uploads a version with progress, deploys it from the device list to a filter with a live count, runs it to completion, then rolls it back', async () => {
    await page.goto(`${base}/firmware?model=LX-200`);
    await page.getByRole('button', { name: 'Upload a version' }).click();
    await page.getByLabel('Version').fill('1.1.0');
    await page.getByLabel('Release notes (Markdown)').fill('**Smoother dimming** <img src=x onerror="window.__xss=1">');
    await page.getByLabel('Changelog (Markdown)').fill('- fixed flicker at 1 %');
    await page
      .getByTestId('upload-file')
      .setInputFiles({ name: 'lx200-1.1.0.bin', mimeType: 'application/octet-stream', buffer: randomBytes(64 * 1024) });
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    const notes = page.getByTestId('firmware-versions').locator('strong', { hasText: 'Smoother dimming' });
    await notes.waitFor({ timeout: 15_000 });
    expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    await screenshot(page, 'firmware');

    // An error of the API is shown as a message, not a blank page.
    await page.getByRole('button', { name: 'Register a model' }).click();
    await page.getByLabel('Name', { exact: true }).fill('bad/name');
    await page.getByRole('button', { name: 'Register', exact: true }).click();
    await page.locator('.api-error').filter({ hasText: 'The model was not registered' }).waitFor();
    await page.keyboard.press('Escape');
    await page.goto(`${base}/devices/NO-SUCH-DEVICE`);
    await page.getByText('No such device').waitFor();

    const online = (await summary()).online;
    await page.goto(`${base}/devices?model=LX-200&status=online`);
    await page.locator('[data-serial="LUM-0001"]').waitFor();
    await page.getByTestId('deploy-filter').click();
    await page.waitForURL(/\/deployments\/new\?/);
    await page.getByLabel('Installed firmware older than').fill('1.1.0');
    await expect
      .poll(() => page.getByTestId('deploy-preview-count').textContent(), { timeout: 10_000 })
      .toBe(String(online - 0));
    await screenshot(page, 'deploy');
    // The switch starts on (windows are respected by default); LUM-0001 has a 02:00-05:00 window
    // from the configuration test above, and this update goes now, whatever the time.
    const respectWindows = page.getByLabel("Install only inside each device's maintenance window");
    expect(await respectWindows.getAttribute('aria-checked')).toBe('true');
    await respectWindows.click();
    expect(await respectWindows.getAttribute('aria-checked')).toBe('false');
    await page.getByTestId('deploy-submit').click();
    await page.getByRole('button', { name: 'Schedule update', exact: true }).click();
    await page.waitForURL(/\/deployments\/[0-9a-f-]{36}$/);
    const status = page.getByTestId('deployment-status');
    await expect.poll(() => status.getAttribute('data-status'), { timeout: 60_000, interval: 500 }).toBe('completed');
    expect(await page.getByTestId('deployment-percent').textContent()).toBe('100');
    expect(await page.locator('dd[data-state="succeeded"]').textContent()).toBe(String(online));
    // The per-device list follows too: every device row ends on succeeded.
    await expect
      .poll(() => page.getByTestId('deployment-updates').locator('[data-status="succeeded"]').count(), {
        timeout: 10_000,
      })
      .toBe(online);
    await screenshot(page, 'deployment');
    expect(
      simulated.filter((d) => d.connected && d.serial.startsWith('LUM-')).every((d) => d.firmware === '1.1.0'),
    ).toBe(true);

    const deploymentUrl = page.url();
    await page.getByTestId('rollback').click();
    await page.getByRole('button', { name: 'Roll back', exact: true }).click();
    await page.waitForURL((url) => url.href !== deploymentUrl && /\/deployments\/[0-9a-f-]{36}$/.test(url.pathname));
    await expect.poll(() => status.getAttribute('data-status'), { timeout: 60_000, interval: 500 }).toBe('completed');
    await expect
      .poll(() => simulated.filter((d) => d.serial.startsWith('LUM-')).every((d) => d.firmware === '1.0.0'), {
        timeout: 10_000,
      })
      .toBe(true);
  }, 150_000);

  it('creates an API key that is shown once and works against the REST API', async () => {
    await page.goto(`${base}/settings/api-keys`);
    await page.getByLabel('Name').fill('production line 2');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = await page.getByTestId('shown-secret').locator('input').inputValue();
    expect(secret).toMatch(/^flk_/);
    const res = await fetch(`${base}/api/v1/devices?limit=1`, { headers: { authorization: `Bearer ${secret}` } });
    expect(res.status).toBe(200);
    await page.getByRole('button', { name: 'I have stored it' }).click();
    await page.locator('[data-key="production line 2"]').waitFor();
    expect(await page.locator('[data-key="production line 2"]').textContent()).not.toContain(secret.slice(12));
    await screenshot(page, 'api-keys');
    await page.goto(`${base}/settings/webhooks`);
    await page.getByText('Add an endpoint').waitFor();
    await screenshot(page, 'webhooks');
  });

  it('selects devices in the list to update them, and rotates a device password shown once', async () => {
    await page.goto(`${base}/devices?model=LX-300`);
    await page.getByLabel('Select SPOT-0001').check();
    await page.getByLabel('Select SPOT-0003').check();
    await page.getByTestId('deploy-selection').click();
    await page.waitForURL(
      (url) => url.pathname === '/deployments/new' && url.searchParams.get('serials') === 'SPOT-0001,SPOT-0003',
    );
    await page.getByLabel('Serial numbers', { exact: true }).waitFor();
    // Both are on 1.0.0, the only LX-300 version: nothing to update, and the form says so.
    await expect.poll(() => page.getByTestId('deploy-preview-count').textContent()).toBe('0');
    expect(await page.getByTestId('deploy-submit').isDisabled()).toBe(true);

    await page.goto(`${base}/devices/LUM-0008`);
    await page.getByRole('button', { name: 'Rotate credentials' }).click();
    await page.getByRole('button', { name: 'Rotate', exact: true }).click();
    const password = await page.getByTestId('shown-secret').locator('input').inputValue();
    expect(password.length).toBeGreaterThanOrEqual(16);
    await page.getByRole('button', { name: 'I have stored it' }).click();
    await page.getByTestId('device-history').getByText('MQTT credentials rotated').waitFor();
    expect(await page.getByText(password).count()).toBe(0);
  });

  it("lists a device's certificates and revokes one after a confirmation", async () => {
    const issued = await account.api.post('/api/v1/devices/SPOT-0002/certificates', { csr: (await makeCsr()).pem });
    expect(issued.status).toBe(201);
    await page.goto(`${base}/devices/SPOT-0002`);
    const row = page
      .getByTestId('device-certificates')
      .locator(`tr[data-fingerprint="${issued.body.fingerprint_sha256}"]`);
    await row.getByText('valid', { exact: true }).waitFor();
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke', exact: true }).click();
    await row.getByText('revoked', { exact: true }).waitFor();
    expect(await row.getByRole('button', { name: 'Revoke' }).count()).toBe(0);
    await page
      .getByTestId('device-history')
      .getByText(/Certificate revoked/)
      .waitFor();
    const listed = await account.api.get('/api/v1/devices/SPOT-0002/certificates');
    expect(listed.body.certificates[0]).toMatchObject({
      fingerprint_sha256: issued.body.fingerprint_sha256,
      revoked_reason: 'revoked',
    });
  });

  it('shows what the service refused of a device: a wrong topic, a bad heartbeat field, an invalid firmware', async () => {
    const creds = lx300[2]!;
    const device = await mqtt.connectAsync(server.service.mqttUrl!, deviceOptions(creds));
    await device.publishAsync(`devices/${creds.serial}/heartbeats`, '{}', { qos: 1 });
    await device.publishAsync(
      topics.heartbeat(creds.serial),
      JSON.stringify({ firmware: 'v1.4.0', ip: '2001:db8::5', uptime_s: 1.5 }),
      { qos: 1 },
    );
    await server.service.ingest.flush();
    await page.goto(`${base}/devices/${creds.serial}`);
    await page.getByTestId('device-firmware-invalid').getByText('v1.4.0').waitFor();
    const refusals = page.getByTestId('device-refusals');
    await refusals
      .locator('[data-refused-message="topic_not_allowed"]')
      .getByText('published outside its topics: 1')
      .waitFor();
    await refusals.getByText(`devices/${creds.serial}/heartbeats`).waitFor();
    const firmware = refusals.locator('tr[data-refused-field="firmware"]');
    await firmware.getByText('invalid format').waitFor();
    await firmware.getByText('v1.4.0').waitFor();
    await refusals.locator('tr[data-refused-field="uptime_s"]').getByText('not an integer').waitFor();
    await page.getByText('2001:db8::5').waitFor();
    await device.endAsync();
  });

  it('creates a webhook whose secret is shown once, shows its deliveries and redelivers one', async () => {
    const received: string[] = [];
    const receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push(body);
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/fleet-events`;
      await page.goto(`${base}/settings/webhooks`);
      await page.getByLabel('Endpoint URL').fill(url);
      await page.getByRole('checkbox', { name: 'device.offline' }).check();
      await page.getByRole('button', { name: 'Add webhook' }).click();
      const secret = await page.getByTestId('shown-secret').locator('input').inputValue();
      expect(secret).toMatch(/^whsec_/);
      await page.getByRole('button', { name: 'I have stored it' }).click();

      // A device goes offline: one delivery, visible in the log.
      await simulated.find((d) => d.serial === 'LUM-0007')!.stop();
      await expect.poll(() => received.length, { timeout: 15_000 }).toBeGreaterThan(0);
      await page.getByText(url).click();
      await expect
        .poll(
          async () => {
            await page.getByRole('button', { name: 'Refresh' }).click();
            return page.locator('[data-status="delivered"]').count();
          },
          { timeout: 15_000 },
        )
        .toBeGreaterThan(0);
      const before = received.length;
      await page.getByRole('button', { name: 'Redeliver' }).first().click();
      await expect.poll(() => received.length, { timeout: 15_000 }).toBe(before + 1);
      expect(JSON.parse(received.at(-1)!).type).toBe('device.offline');
    } finally {
      receiver.close();
    }
  });

  it('pauses, resumes and cancels a deployment, each after a confirmation', async () => {
    // LUM-0008 is offline: its update waits in the queue, so the deployment stays open.
    await page.goto(`${base}/deployments/new?serials=LUM-0008&model=LX-200&version=1.1.0`);
    await expect.poll(() => page.getByTestId('deploy-preview-count').textContent(), { timeout: 10_000 }).toBe('1');
    await page.getByTestId('deploy-submit').click();
    await page.getByRole('button', { name: 'Schedule update', exact: true }).click();
    await page.waitForURL(/\/deployments\/[0-9a-f-]{36}$/);
    const status = page.getByTestId('deployment-status');
    await expect.poll(() => status.getAttribute('data-status')).toMatch(/scheduled|running/);
    // Each confirmation closes before the next button is pressed: a click on the page while the
    // last dialog was still closing could land on its overlay instead (CI, a quiet 2-core run).
    const confirm = async (button: string, ok: string) => {
      await page.getByRole('button', { name: button, exact: true }).click();
      await page.getByRole('dialog').getByRole('button', { name: ok, exact: true }).click();
      await page.getByRole('dialog').waitFor({ state: 'hidden' });
    };
    await confirm('Pause', 'Pause');
    await expect.poll(() => status.getAttribute('data-status')).toBe('paused');
    await confirm('Resume', 'Resume');
    await expect.poll(() => status.getAttribute('data-status')).toMatch(/scheduled|running/);
    await confirm('Cancel', 'Cancel deployment');
    await expect.poll(() => status.getAttribute('data-status')).toBe('cancelled');
    await expect.poll(() => page.locator('dd[data-state="cancelled"]').textContent()).toBe('1');
  });

  // Two 15 s waits on the server's answers alone: the default 30 s for the whole test was less
  // than its own waits add up to, and a loaded CI machine ran out of it.
  it(
    'registers a firmware signing key in Settings, then uploads a signed version that Firmware > Versions shows as signed',
    { timeout: 90_000 },
    async () => {
      const key = newSigningKey();
      await page.goto(`${base}/settings/firmware-signing`);
      await page.getByText('No signing key registered').waitFor();
      await page.getByLabel('Public key (PEM').fill(key.publicPem);
      await page.getByRole('button', { name: 'Register key' }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Register', exact: true }).click();
      await expect.poll(() => page.getByTestId('signing-key-id').textContent()).toBe(key.keyId);
      expect(await page.getByTestId('signing-key-current').textContent()).toContain('-----BEGIN PUBLIC KEY-----');

      const bytes = randomBytes(32 * 1024);
      await page.goto(`${base}/firmware?model=LX-200`);
      await page.getByRole('button', { name: 'Upload a version' }).click();
      await page.getByLabel('Version').fill('1.2.0');
      await page
        .getByTestId('upload-file')
        .setInputFiles({ name: 'lx200-1.2.0.bin', mimeType: 'application/octet-stream', buffer: bytes });
      await page.getByLabel(`Signature (key ${key.keyId})`).fill(signFirmware(key.privateKey, bytes));
      await page.getByRole('button', { name: 'Upload', exact: true }).click();
      const versions = page.getByTestId('firmware-versions');
      await expect
        .poll(() => versions.getByTestId('version-signature').first().textContent(), { timeout: 15_000 })
        .toBe(`signed with key ${key.keyId}`);
      expect(await versions.getByTestId('version-signed').count()).toBe(1);
      // The versions uploaded before the key are marked, so nobody mistakes them for signed ones.
      expect(await versions.getByTestId('version-unsigned').count()).toBe(2);
      // One of them gets its signature attached (deploys and rollbacks to it need one now).
      await versions.getByText('1.0.0', { exact: true }).click();
      await page.getByRole('button', { name: 'Attach signature…' }).click();
      await page.getByLabel(`Signature (key ${key.keyId})`).fill(signFirmware(key.privateKey, lx200First));
      await page.getByRole('dialog').getByRole('button', { name: 'Attach', exact: true }).click();
      await expect.poll(() => versions.getByTestId('version-unsigned').count(), { timeout: 15_000 }).toBe(1);
      expect(await versions.getByTestId('version-signed').count()).toBe(2);
    },
  );

  it('a viewer sees everything but cannot change anything, and the API refuses anyway', async () => {
    // The admin invites the viewer in Settings > Users.
    await page.goto(`${base}/settings/users`);
    await page.getByLabel('Email').fill('viewer@example.test');
    await page.getByLabel('Initial password').fill('short');
    await page.getByRole('button', { name: 'Create user' }).click();
    await page.locator('.api-error').filter({ hasText: 'must be 8 to 200 characters' }).waitFor();
    await page.getByLabel('Initial password').fill('viewer-password');
    await page.getByRole('button', { name: 'Create user' }).click();
    await page.getByTestId('users-table').getByText('viewer@example.test').waitFor();
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(/\/login/);
    await logIn(page, 'viewer@example.test', 'viewer-password');
    await page.getByTestId('stat-total').waitFor();
    expect(await page.getByTestId('current-role').textContent()).toBe('viewer');

    await page.goto(`${base}/devices`);
    await page.locator('[data-serial="LUM-0001"]').waitFor();
    expect(await page.getByTestId('deploy-filter').count()).toBe(0);
    expect(await page.getByRole('checkbox').count()).toBe(0);
    await page.goto(`${base}/devices/LUM-0001`);
    await page.getByTestId('device-config').waitFor();
    expect(await page.getByRole('button', { name: 'Edit configuration' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Rotate credentials' }).count()).toBe(0);
    await page.goto(`${base}/settings/api-keys`);
    await page.getByTestId('api-keys-table').waitFor();
    expect(await page.getByRole('button', { name: 'Create key' }).count()).toBe(0);
    await page.goto(`${base}/settings/firmware-signing`);
    await page.getByTestId('signing-key-id').waitFor();
    expect(await page.getByRole('button', { name: 'Register key' }).count()).toBe(0);

    // The server refuses too, even with the viewer's valid CSRF token.
    const refused = await page.evaluate(async () => {
      const session = (await (await fetch('/api/v1/session')).json()) as { csrf_token: string };
      const res = await fetch('/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': session.csrf_token },
        body: JSON.stringify({
          query: 'mutation { updateDevice(serial: "LUM-0001", input: { name: "hacked" }) { name } }',
        }),
      });
      return (await res.json()) as { errors?: { extensions?: { code?: string } }[] };
    });
    expect(refused.errors?.[0]?.extensions?.code).toBe('forbidden');
  });

  it('an expired session goes back to the login page, then back to where the user was', async () => {
    await page.goto(`${base}/firmware`);
    await page.getByTestId('firmware-versions').waitFor();
    await browser.context.clearCookies();
    // Client-side navigation: the next GraphQL request meets the expired session.
    await page.getByRole('link', { name: 'Deployments' }).click();
    await page.waitForURL(
      (url) =>
        url.pathname === '/login' &&
        url.searchParams.get('next') === '/deployments' &&
        url.searchParams.get('expired') === '1',
    );
    await page.getByText('Your session has ended').waitFor();
    await logIn(page, 'viewer@example.test', 'viewer-password');
    await page.waitForURL((url) => url.pathname === '/deployments');
    await page.getByTestId('deployments-table').waitFor();
  });

  it('showed no console errors in any page', () => {
    expect(browser.errors).toEqual([]);
  });
});
