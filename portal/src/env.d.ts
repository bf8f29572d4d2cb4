/// <reference types="vite/client" />

declare module '*.vue' {
  import type { DefineComponent } from 'vue';
  // Vue's own shim shape: props and emits are typed per component by vue-tsc.
  const component: DefineComponent<object, object, unknown>;
  export default component;
}
