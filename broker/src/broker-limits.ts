/**
 * Messages Aedes (MQEmitter) delivers at once; its default is 100. Each QoS 1 delivery takes a
 * few event-loop turns (setImmediate, persistence, write), so under load 100 at a time capped an
 * OTA campaign at about 1,500 commands/s although its rows were written in 0.3 s
 * (bench/ota.bench.ts). The cluster's MQEmitter takes the same; the OTA command publisher keeps
 * fewer than this in flight (PUBLISH_WINDOW below), so MQEmitter's queue never builds up.
 */
export const DELIVERY_CONCURRENCY = 2000;

/**
 * What the broker tells senders of many messages (the OTA command publisher) to keep in flight
 * at once (DeviceGateway.publishWindow): half the delivery concurrency, leaving room for the
 * configuration pushes and Last Wills that arrive meanwhile.
 */
export const PUBLISH_WINDOW = DELIVERY_CONCURRENCY / 2;

/**
 * Device-ready notifications handed to the OTA engine at once. The engine reads them in batches
 * of up to 1,000 (one query per batch, one batch at a time), so this bounds memory, not database
 * load. It was 4, which capped the engine's batches at 4 devices: a 10,000-device reconnect
 * storm drained at about 200 devices/s (one batch per 20 ms window).
 */
export const READY_CONCURRENCY = 1000;
