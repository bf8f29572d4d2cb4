/**
 * What other areas may read or write of devices inside their own unit of work (a certificate's
 * history entry in the transaction that issued it, the devices a fleet read needs). The devices
 * area's store stays its own: these are the operations it publishes, and the layer test
 * (test/unit/architecture.test.ts) keeps every other area out of `devices/store/`.
 */
export { findDeviceId, selectDevicesByIds } from './store/devices.store';
export { appendDeviceEvents, selectHistoryHeads } from './store/history.store';
