import { Registry, Counter, Histogram, Gauge, collectDefaultMetrics } from 'prom-client';

/**
 * The service's Prometheus metrics, one registry per service instance (tests run several
 * servers in one process). Every area adds its instruments here so /metrics lists them all.
 */
const O_N_DEFAULT_METRICS = [
  'process_open_fds',
  'nodejs_active_handles',
  'nodejs_active_handles_total',
  'nodejs_active_resources',
  'nodejs_active_resources_total',
];

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // These default collectors walk every handle and file descriptor of the process on each
  // scrape: with 5,000 device connections one scrape held the event loop about 50 ms
  // (measured in bench/ota.bench.ts, which polls /metrics). A scrape must not cost the broker
  // time in proportion to its connections; the connected-device gauges say the same thing.
  for (const name of O_N_DEFAULT_METRICS) registry.removeSingleMetric(name);
  return {
    registry,
    httpRequests: new Counter({
      name: 'fleet_http_requests_total',
      help: 'HTTP requests by method, route and status',
      labelNames: ['method', 'route', 'status'] as const,
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'fleet_http_request_duration_seconds',
      help: 'HTTP request duration by route',
      labelNames: ['method', 'route'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    retentionDeleted: new Counter({
      name: 'fleet_retention_deleted_rows_total',
      help: 'Rows deleted by the retention pass, by table',
      labelNames: ['table'] as const,
      registers: [registry],
    }),
    rateLimited: new Counter({
      name: 'fleet_rate_limited_total',
      help: 'Requests refused with 429 by the per-key rate limit',
      registers: [registry],
    }),
    mqttConnectionsRefused: new Counter({
      name: 'fleet_mqtt_connections_refused_total',
      help: 'MQTT connections refused, by reason',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    mqttAuthorizationDenied: new Counter({
      name: 'fleet_mqtt_authorization_denied_total',
      help: 'MQTT publishes and subscriptions refused by the topic ACL',
      labelNames: ['action'] as const,
      registers: [registry],
    }),
    mqttMessagesDropped: new Counter({
      name: 'fleet_mqtt_messages_dropped_total',
      help: 'Device messages dropped, by topic kind and reason',
      labelNames: ['kind', 'reason'] as const,
      registers: [registry],
    }),
    deviceCsrRefused: new Counter({
      name: 'fleet_device_csr_refused_total',
      help: 'Certificate requests devices sent on devices/{serial}/csr that were refused, by reason (renewal_pending, no_certificate, csr_invalid, subject_mismatch, ca_unavailable)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    credentialsDelivered: new Counter({
      name: 'fleet_credentials_delivered_total',
      help: 'New credentials written to a connected device on devices/{serial}/credentials, by kind (password, certificate)',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    mqttMessagesAccepted: new Counter({
      name: 'fleet_mqtt_messages_accepted_total',
      help: 'Device messages accepted, by topic kind',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    mqttPublishesRefused: new Counter({
      name: 'fleet_mqtt_publishes_refused_total',
      help: 'Device publishes refused by the topic ACL (acknowledged and dropped), by reason (other_device, service_to_device, not_a_device_topic)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    mqttFloodDisconnects: new Counter({
      name: 'fleet_mqtt_flood_disconnects_total',
      help: 'Device connections closed for flooding, by reason (message_rate, refused_publishes)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    heartbeatFieldsRefused: new Counter({
      name: 'fleet_heartbeat_fields_refused_total',
      help: 'Heartbeat fields refused (the rest of the heartbeat recorded), by field and reason',
      labelNames: ['field', 'reason'] as const,
      registers: [registry],
    }),
    mqttKeepaliveOutsideRange: new Counter({
      name: 'fleet_mqtt_keepalive_outside_range_total',
      help: 'Connections whose CONNECT keepalive was outside the documented range, by reason (zero and above_max are served as the maximum; below_min as sent)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    heartbeatFlushRows: new Counter({
      name: 'fleet_heartbeat_flush_rows_total',
      help: 'Device rows written by heartbeat/presence batch flushes',
      registers: [registry],
    }),
    heartbeatFlushSeconds: new Histogram({
      name: 'fleet_heartbeat_flush_duration_seconds',
      help: 'Duration of one heartbeat/presence batch flush (one statement plus history and events)',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    mqttConnectedDevices: new Gauge({
      name: 'fleet_mqtt_connected_devices',
      help: 'Devices connected to this process',
      registers: [registry],
    }),
    otaCommandsPublished: new Counter({
      name: 'fleet_ota_commands_published_total',
      help: 'OTA commands published on devices/{serial}/ota (first sends and re-sends)',
      registers: [registry],
    }),
    otaReportsIgnored: new Counter({
      name: 'fleet_ota_reports_ignored_total',
      help: 'OTA progress reports ignored, by reason (unknown_job, finished, not_sent, out_of_order)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    otaUnknownErrorCodes: new Counter({
      name: 'fleet_ota_error_codes_unknown_total',
      help: 'OTA failure reports whose error_code is outside the protocol vocabulary (recorded as other)',
      registers: [registry],
    }),
    otaLockMessages: new Counter({
      name: 'fleet_ota_lock_messages_total',
      help: 'Update lock messages stored, by reason (release for a release) and whether the request was cut to the 24 h cap',
      labelNames: ['reason', 'capped'] as const,
      registers: [registry],
    }),
    otaUpdatesFinished: new Counter({
      name: 'fleet_ota_updates_finished_total',
      help: 'Device updates that reached a final state, by state',
      labelNames: ['state'] as const,
      registers: [registry],
    }),
    firmwareDownloadBytes: new Counter({
      name: 'fleet_firmware_download_bytes_total',
      help: 'Firmware bytes served through signed download links',
      registers: [registry],
    }),
    graphqlOperations: new Counter({
      name: 'fleet_graphql_operations_total',
      help: 'GraphQL operations over HTTP by type and outcome',
      labelNames: ['type', 'outcome'] as const,
      registers: [registry],
    }),
    graphqlSockets: new Gauge({
      name: 'fleet_graphql_websockets',
      help: 'Open authenticated graphql-ws connections',
      registers: [registry],
    }),
    liveEventsDropped: new Counter({
      name: 'fleet_live_events_dropped_total',
      help: 'Subscription items dropped because a subscriber fell too far behind',
      registers: [registry],
    }),
    webhookAttempts: new Counter({
      name: 'fleet_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome (delivered, failed, gave_up)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    eventsDispatched: new Counter({
      name: 'fleet_events_dispatched_total',
      help: 'Outbox events dispatched to the bus',
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
