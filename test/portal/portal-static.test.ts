import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/test-server';
import { ensurePortalBuilt } from '../e2e/browser';
import { PORTAL_DIST } from '#api/http/portal-static';
import { relativeTime } from '#portal/shared/format';
import { ifStarted } from '../helpers/teardown';

describe('the service serves the portal', () => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    ensurePortalBuilt();
    server = await startTestServer();
    base = server.service.httpUrl;
  }, 120_000);
  afterAll(async () => ifStarted(server)?.close());

  it('answers deep links with the app so a reload keeps the page, and revalidates index.html', async () => {
    for (const p of [
      '/',
      '/devices/SN-000001',
      '/deployments/0b6c2f0e-1111-4222-8333-944445555666',
      '/settings/api-keys?x=1',
    ]) {
      const res = await fetch(base + p, { headers: { accept: 'text/html' } });
      expect(res.status, p).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/text\/html/);
      expect(res.headers.get('cache-control')).toBe('no-cache');
      expect(await res.text()).toContain('<div id="app"></div>');
    }
  });

  it('serves a production build, also when the test run itself built it', () => {
    // ensurePortalBuilt runs under vitest (NODE_ENV=test): a build that kept that NODE_ENV
    // shipped Vue's development code and warnings (35 KB more gzipped on the first page).
    const assets = path.join(PORTAL_DIST, 'assets');
    const development = fs
      .readdirSync(assets)
      .filter((f) => f.endsWith('.js'))
      .filter((f) => fs.readFileSync(path.join(assets, f), 'utf8').includes('[Vue warn]'));
    expect(development).toEqual([]);
  });

  it('serves hashed assets as immutable', async () => {
    const asset = fs.readdirSync(path.join(PORTAL_DIST, 'assets')).find((f) => f.endsWith('.js'))!;
    const res = await fetch(`${base}/assets/${asset}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/javascript/);
    expect(res.headers.get('cache-control')).toMatch(/immutable/);
    expect(res.headers.get('cache-control')).toMatch(/max-age=31536000/);
  });

  it('serves the portal under a Content-Security-Policy its build works with', async () => {
    const res = await fetch(base + '/devices', { headers: { accept: 'text/html' } });
    const csp = res.headers.get('content-security-policy') ?? '';
    const directives = new Map(
      csp
        .split(';')
        .map((d) => d.trim().split(/\s+/))
        .map(([name, ...values]) => [name!, values]),
    );
    expect(directives.get('script-src')).toEqual(["'self'"]);
    expect(directives.get('style-src')).toEqual(["'self'", "'unsafe-inline'"]);
    expect(directives.get('img-src')).toEqual(["'self'", 'data:']);
    expect(directives.get('frame-ancestors')).toEqual(["'none'"]);
    expect(directives.get('object-src')).toEqual(["'none'"]);
    // The graphql-ws socket of the page's own origin; no upgrade to an https port that may not exist.
    const host = new URL(base).host;
    expect(directives.get('connect-src')).toEqual(["'self'", `ws://${host}`, `wss://${host}`]);
    expect(directives.has('upgrade-insecure-requests')).toBe(false);
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('strict-transport-security')).toBeNull();
    // A forged Host is not repeated into the policy.
    const forged = await new Promise<string>((resolve, reject) => {
      const req = http.get(
        base + '/',
        { headers: { host: "evil.example; script-src 'unsafe-inline'", accept: 'text/html' } },
        (r) => {
          r.resume();
          resolve(String(r.headers['content-security-policy'] ?? ''));
        },
      );
      req.on('error', reject);
    });
    expect(forged).not.toContain('evil');
    // What the policy allows is what the build needs: external module scripts only (no inline
    // script, no eval), stylesheets and icons from our origin or data: URIs.
    const html = await res.text();
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [, attributes, body] of scripts) {
      expect(attributes).toMatch(/\bsrc="\/assets\//);
      expect(body!.trim()).toBe('');
    }
    expect(html).not.toMatch(/\son[a-z]+=/i);
    for (const [, href] of html.matchAll(/<link\b[^>]*\bhref="([^"]+)"/g)) expect(href).toMatch(/^(\/assets\/|data:)/);
    const assets = fs.readdirSync(path.join(PORTAL_DIST, 'assets')).filter((f) => f.endsWith('.js'));
    for (const file of assets) {
      const code = fs.readFileSync(path.join(PORTAL_DIST, 'assets', file), 'utf8');
      expect(code, file).not.toMatch(/\bnew Function\(|\beval\(/);
    }
  });

  it('leaves the API, GraphQL, missing files and writes to their own answers', async () => {
    const api = await fetch(`${base}/api/v1/no-such-route`, { headers: { accept: 'text/html' } });
    expect(api.status).toBe(404);
    expect(api.headers.get('content-type')).toMatch(/problem\+json/);
    const missingAsset = await fetch(`${base}/assets/missing-abc123.js`);
    expect(missingAsset.status).toBe(404);
    const missingFile = await fetch(`${base}/favicon.png`, { headers: { accept: 'text/html' } });
    expect(missingFile.status).toBe(404);
    const post = await fetch(`${base}/devices`, { method: 'POST', headers: { accept: 'text/html' } });
    expect(post.status).toBe(404);
    const health = await fetch(`${base}/healthz`);
    expect(await health.json()).toEqual({ status: 'ok' });
  });
});

describe('portal formatting', () => {
  it('says "just now" for small clock differences both ways, and rounds larger ones', () => {
    const ref = new Date('2026-11-22T10:00:00Z');
    expect(relativeTime('2026-11-22T10:00:20Z', ref)).toBe('just now');
    expect(relativeTime('2026-11-22T09:59:30Z', ref)).toBe('just now');
    expect(relativeTime('2026-11-22T09:55:00Z', ref)).toBe('5 minutes ago');
    expect(relativeTime('2026-11-22T07:00:00Z', ref)).toBe('3 hours ago');
    expect(relativeTime(null, ref)).toBe('never');
  });
});
