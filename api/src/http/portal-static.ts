import fs from 'node:fs';
import path from 'node:path';
import express, { type Router } from 'express';
import { appRoot } from '#core/shared/app-root';

/**
 * Where `npm run build:portal` writes the portal (vite build of portal/), below the package root;
 * `npm run build` puts it at the same place in the artifact.
 */
export const PORTAL_DIST = path.join(appRoot(import.meta.url), 'portal', 'dist');

/** Paths the portal never answers (the API, GraphQL, probes): they keep their own 404s. */
const NOT_PORTAL = /^\/(api|graphql|healthz|readyz|metrics|mqtt|firmware-files|downloads)(\/|$)/;

/**
 * Serves the built portal at `/`. Hashed files under /assets are immutable (a new build has new
 * names); index.html is always revalidated so a deploy shows at once. Any other GET that wants
 * HTML gets index.html, so deep links (/devices/SN-1) survive a reload: the client router
 * decides what to show.
 */
export function portalStatic(distDir: string = PORTAL_DIST): Router {
  const router = express.Router();
  const indexFile = path.join(distDir, 'index.html');

  router.use(
    '/assets',
    express.static(path.join(distDir, 'assets'), {
      immutable: true,
      maxAge: '365d',
      index: false,
    }),
  );
  router.use(express.static(distDir, { index: false, maxAge: 0 }));

  router.use((req, res, next) => {
    const isPage =
      (req.method === 'GET' || req.method === 'HEAD') &&
      !NOT_PORTAL.test(req.path) &&
      // A request for a file that does not exist (favicon.png, /x.js) is a plain 404, not the app.
      path.extname(req.path) === '' &&
      req.accepts('html') !== false;
    if (!isPage) {
      next();
      return;
    }
    if (!fs.existsSync(indexFile)) {
      res
        .status(503)
        .type('text/plain')
        .send(
          'The portal has not been built yet. Run `npm run build:portal` (npm start does it when portal/dist is missing), then reload.',
        );
      return;
    }
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(indexFile);
  });
  return router;
}
