import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import vue from '@vitejs/plugin-vue';

const root = fileURLToPath(new URL('.', import.meta.url));

/**
 * The portal is built to portal/dist and served by the service at / (api/src/http/portal-static.ts).
 * `npm run dev:portal` proxies the API to a running service (PORTAL_API, default http://127.0.0.1:8080).
 */
export default defineConfig({
  root,
  base: '/',
  plugins: [vue()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // The first page must stay small: charts and the heavier pages are split into lazy chunks.
    chunkSizeWarningLimit: 700,
  },
  server: {
    proxy: {
      '/api': process.env.PORTAL_API ?? 'http://127.0.0.1:8080',
      '/graphql': { target: process.env.PORTAL_API ?? 'http://127.0.0.1:8080', ws: true },
    },
  },
});
