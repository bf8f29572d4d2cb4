import { createApp } from 'vue';
import App from './App.vue';
import { createPortalRouter } from './router';

const app = createApp(App);
const router = createPortalRouter();
app.use(router);
// A render error in one page shows a message instead of a blank page (see App.vue).
app.config.errorHandler = (error, _instance, info) => {
  window.dispatchEvent(new CustomEvent('portal-error', { detail: { error, info } }));
};
// graphql-ws can leave its internal connect promise unobserved when a socket closes (logout,
// expired session, server restart); every subscription already got that close through its own
// error callback, so the duplicate rejection is not an error of the page.
window.addEventListener('unhandledrejection', (event) => {
  if (typeof CloseEvent !== 'undefined' && event.reason instanceof CloseEvent) event.preventDefault();
});
app.mount('#app');
