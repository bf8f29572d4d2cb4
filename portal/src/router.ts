import { createRouter, createWebHistory, type RouteRecordRaw } from 'vue-router';
import { loadSession, onSessionExpired, session } from './shared/session';
import { resetApollo } from './shared/api/apollo';
import AppLayout from './layout/AppLayout.vue';

declare module 'vue-router' {
  /** What the routes below say about themselves. */
  interface RouteMeta {
    /** Reachable without a session (the login page). */
    public?: boolean;
    /** The page's name in the browser's title bar. */
    title?: string;
  }
}
import LoginPage from './features/auth/pages/LoginPage.vue';

const routes: RouteRecordRaw[] = [
  { path: '/login', name: 'login', component: LoginPage, meta: { public: true, title: 'Log in' } },
  {
    path: '/',
    component: AppLayout,
    children: [
      {
        path: '',
        name: 'dashboard',
        component: () => import('./features/dashboard/pages/DashboardPage.vue'),
        meta: { title: 'Dashboard' },
      },
      {
        path: 'devices',
        name: 'devices',
        component: () => import('./features/devices/pages/DeviceListPage.vue'),
        meta: { title: 'Devices' },
      },
      {
        path: 'devices/:serial',
        name: 'device',
        component: () => import('./features/devices/pages/DevicePage.vue'),
        props: true,
        meta: { title: 'Device' },
      },
      {
        path: 'devices/:serial/warranty',
        name: 'device-warranty',
        component: () => import('./features/health/pages/WarrantyPage.vue'),
        props: true,
        meta: { title: 'Warranty evidence' },
      },
      {
        path: 'firmware',
        name: 'firmware',
        component: () => import('./features/firmware/pages/FirmwarePage.vue'),
        meta: { title: 'Firmware' },
      },
      {
        path: 'deployments',
        name: 'deployments',
        component: () => import('./features/deployments/pages/DeploymentsPage.vue'),
        meta: { title: 'Deployments' },
      },
      {
        path: 'deployments/new',
        name: 'deploy',
        component: () => import('./features/deployments/pages/NewDeploymentPage.vue'),
        meta: { title: 'Schedule an update' },
      },
      {
        path: 'deployments/:id',
        name: 'deployment',
        component: () => import('./features/deployments/pages/DeploymentPage.vue'),
        props: true,
        meta: { title: 'Deployment' },
      },
      {
        path: 'sites',
        name: 'sites',
        component: () => import('./features/sites/pages/SitesPage.vue'),
        meta: { title: 'Sites' },
      },
      { path: 'settings', redirect: { name: 'api-keys' } },
      {
        path: 'settings/api-keys',
        name: 'api-keys',
        component: () => import('./features/accounts/pages/ApiKeysPage.vue'),
        meta: { title: 'API keys' },
      },
      {
        path: 'settings/webhooks',
        name: 'webhooks',
        component: () => import('./features/webhooks/pages/WebhooksPage.vue'),
        meta: { title: 'Webhooks' },
      },
      {
        path: 'settings/firmware-signing',
        name: 'firmware-signing',
        component: () => import('./features/firmware/pages/FirmwareSigningPage.vue'),
        meta: { title: 'Firmware signing' },
      },
      {
        path: 'settings/users',
        name: 'users',
        component: () => import('./features/accounts/pages/UsersPage.vue'),
        meta: { title: 'Users' },
      },
      {
        path: ':pathMatch(.*)*',
        name: 'not-found',
        component: () => import('./layout/NotFoundPage.vue'),
        meta: { title: 'Not found' },
      },
    ],
  },
];

export function createPortalRouter() {
  const router = createRouter({ history: createWebHistory(), routes });

  router.beforeEach(async (to) => {
    if (!session.loaded) await loadSession();
    if (to.meta.public) {
      // Already logged in: the login page forwards to where the user wanted to go.
      if (to.name === 'login' && session.user)
        return typeof to.query.next === 'string' && to.query.next.startsWith('/')
          ? to.query.next
          : { name: 'dashboard' };
      return true;
    }
    if (!session.user) return { name: 'login', query: { next: to.fullPath } };
    return true;
  });
  router.afterEach((to) => {
    document.title = `${to.meta.title ?? 'Fleet'} · Fleet portal`;
  });

  // A page's code could not be loaded (a new build replaced the old files, or the network
  // dropped): load that address afresh instead of leaving an empty page.
  router.onError((error: Error, to) => {
    if (/dynamically imported module|Importing a module script failed|Failed to fetch/i.test(error.message))
      window.location.assign(to.fullPath);
    else window.dispatchEvent(new CustomEvent('portal-error', { detail: { error } }));
  });

  // Session expired while working: back to login, then back to this page.
  onSessionExpired(() => {
    const here = router.currentRoute.value;
    void resetApollo();
    if (here.name !== 'login') void router.push({ name: 'login', query: { next: here.fullPath, expired: '1' } });
  });
  return router;
}
