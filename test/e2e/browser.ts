import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page, type ConsoleMessage } from 'playwright-core';

/** Debian's Chromium (never a downloaded browser): `apt-get install -y chromium`. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const hasChromium = fs.existsSync(CHROMIUM);
export const skipReason = `Chromium not found at ${CHROMIUM}: install it with \`apt-get install -y chromium\` (or set CHROMIUM_PATH) to run the portal browser tests.`;

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

/** Builds portal/dist when missing or stale, so `npm test` does not depend on a prior build. */
export function ensurePortalBuilt(): void {
  const result = spawnSync(process.execPath, [path.join(root, 'portal/scripts/ensure-built.mjs'), '--strict'], {
    stdio: 'pipe',
    encoding: 'utf8',
  });
  if (result.status !== 0 || !fs.existsSync(path.join(root, 'portal/dist/index.html'))) {
    throw new Error(`The portal build failed:\n${result.stdout}\n${result.stderr}`);
  }
}

export interface Browser {
  context: BrowserContext;
  /** Console errors and uncaught page errors seen so far (expected 401s excluded). */
  errors: string[];
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

/** A fresh headless Chromium profile (its own temp user data dir). */
export async function launchBrowser(options: { viewport?: { width: number; height: number } } = {}): Promise<Browser> {
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-e2e-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: options.viewport ?? { width: 1366, height: 860 },
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
  // No CSS transitions or animations. Playwright checks what is under the pointer on the first
  // event of a click only; a dialog still scaling in, or a section still expanding, can move the
  // button before the mouse is released, and the click is lost without an error. On a loaded
  // 2-core machine that failed 3 runs of the portal suite in 9 (a dialog that never opened, a key
  // that was never registered). Every transition still runs its end hooks: Vue ends one at once
  // when the computed style gives it no duration.
  await context.addInitScript(() => {
    // No element exists yet when this runs; the portal's module scripts run after 'interactive'.
    document.addEventListener(
      'readystatechange',
      () => {
        const style = document.createElement('style');
        style.textContent = '*, *::before, *::after { transition: none !important; animation: none !important; }';
        document.head.appendChild(style);
      },
      { once: true },
    );
  });
  const errors: string[] = [];
  const watch = (page: Page) => {
    page.on('console', (message: ConsoleMessage) => {
      if (message.type() !== 'error') return;
      const url = message.location().url;
      // Chromium logs every 401 response as a console error: the session probe before login,
      // a refused login and an expired session are expected answers, not portal errors.
      if (/status of 401/.test(message.text()) && /\/api\/v1\/session|\/graphql/.test(url)) return;
      errors.push(`${message.text()} (${url})`);
    });
    page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`));
  };
  context.on('page', watch);
  for (const page of context.pages()) watch(page);
  return {
    context,
    errors,
    async newPage() {
      const existing = context.pages().find((p) => p.url() === 'about:blank');
      return existing ?? (await context.newPage());
    },
    async close() {
      await context.close().catch(() => undefined);
      fs.rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

/** Logs in through the form (the real flow: REST session cookie + CSRF token). */
export async function logIn(page: Page, email: string, password: string): Promise<void> {
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
}

/** A fresh browser with a page logged in to the portal at `base` as `account`'s admin (the dashboard reached). */
export async function openPortalAs(
  base: string,
  account: { adminEmail: string; adminPassword: string },
): Promise<{ browser: Browser; page: Page }> {
  const browser = await launchBrowser();
  const page = await browser.newPage();
  await page.goto(`${base}/login`);
  await logIn(page, account.adminEmail, account.adminPassword);
  await page.waitForURL((url) => !url.pathname.startsWith('/login'));
  return { browser, page };
}

/** Saves a screenshot for the README when PORTAL_SCREENSHOTS=1 (kept out of normal test runs). */
export async function screenshot(page: Page, name: string): Promise<void> {
  if (process.env.PORTAL_SCREENSHOTS !== '1') return;
  const dir = path.join(root, 'docs/screenshots');
  fs.mkdirSync(dir, { recursive: true });
  await page.waitForTimeout(1500); // let lazy charts load and finish their entry animation
  await page.screenshot({ path: path.join(dir, `${name}.png`) });
}
