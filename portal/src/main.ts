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
app.mount('#app');
