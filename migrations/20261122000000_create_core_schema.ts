import type { Knex } from 'knex';

/**
 * The whole first schema. Every row belongs to exactly one account (tenant isolation is
 * enforced by `account_id` in every query). Version keys use the "C" collation so that the
 * sortable firmware keys compare byte by byte on every PostgreSQL locale.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('accounts', (t) => {
    t.uuid('id').primary();
    t.text('name').notNullable();
    t.integer('quota').notNullable();
    // Money in minor units (cents) to keep arithmetic exact.
    t.bigInteger('budget_minor').notNullable();
    t.string('currency', 3).notNullable();
    t.bigInteger('unit_price_minor').notNullable();
    t.specificType('thresholds', 'integer[]').notNullable().defaultTo(knex.raw("'{80,90,100}'"));
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('users', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('email').notNullable().unique();
    t.text('password_hash').notNullable();
    t.text('role').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['account_id']);
  });

  // Failed logins counted per e-mail string (existing or not) so the throttle does not reveal accounts.
  await knex.schema.createTable('login_throttle', (t) => {
    t.text('email').primary();
    t.integer('failures').notNullable().defaultTo(0);
    t.timestamp('window_started_at', { useTz: true }).notNullable();
    t.timestamp('locked_until', { useTz: true });
  });

  await knex.schema.createTable('sessions', (t) => {
    t.text('token_hash').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.text('csrf_token').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['user_id']);
  });

  await knex.schema.createTable('api_keys', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('prefix').notNullable();
    t.text('secret_hash').notNullable().unique();
    t.text('role').notNullable();
    t.integer('rate_limit_per_minute');
    t.timestamp('last_used_at', { useTz: true });
    t.timestamp('revoked_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['account_id', 'created_at']);
  });

  await knex.schema.createTable('models', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('description').notNullable().defaultTo('');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['account_id', 'name']);
  });

  await knex.schema.createTable('devices', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    // Unique across accounts: a serial is claimed by one manufacturer at most.
    t.specificType('serial', 'text COLLATE "C"').notNullable().unique();
    t.text('name').notNullable();
    t.uuid('model_id').notNullable().references('models.id');
    t.text('firmware');
    t.specificType('firmware_key', 'text COLLATE "C"');
    t.text('status').notNullable().defaultTo('offline');
    t.text('connectivity').notNullable().defaultTo('offline');
    t.text('ip');
    t.timestamp('last_seen', { useTz: true });
    t.integer('uptime_s');
    t.integer('rssi');
    t.jsonb('tags').notNullable().defaultTo('{}');
    t.jsonb('desired_config').notNullable().defaultTo('{}');
    t.integer('desired_config_version').notNullable().defaultTo(0);
    t.jsonb('reported_config');
    t.integer('reported_config_version');
    t.integer('heartbeat_interval_s').notNullable().defaultTo(60);
    t.uuid('current_update_id');
    t.text('broker_node');
    t.timestamp('claimed_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  // Keyset paging by serial inside an account, alone and under each filter the list offers.
  await knex.raw('CREATE INDEX devices_account_serial ON devices (account_id, serial)');
  await knex.raw('CREATE INDEX devices_account_model_serial ON devices (account_id, model_id, serial)');
  await knex.raw('CREATE INDEX devices_account_status_serial ON devices (account_id, status, serial)');
  await knex.raw('CREATE INDEX devices_account_firmware_serial ON devices (account_id, firmware, serial)');
  await knex.raw('CREATE INDEX devices_account_model_fwkey ON devices (account_id, model_id, firmware_key)');
  await knex.raw("CREATE INDEX devices_online_last_seen ON devices (last_seen) WHERE connectivity = 'online'");

  await knex.schema.createTable('device_credentials', (t) => {
    t.uuid('device_id').primary().references('devices.id').onDelete('CASCADE');
    t.text('secret_hash').notNullable();
    t.timestamp('rotated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('device_events', (t) => {
    t.bigIncrements('id').primary();
    t.uuid('account_id').notNullable();
    t.uuid('device_id').notNullable().references('devices.id').onDelete('CASCADE');
    t.text('type').notNullable();
    t.jsonb('data').notNullable().defaultTo('{}');
    t.timestamp('occurred_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('CREATE INDEX device_events_device_id ON device_events (device_id, id DESC)');

  await knex.schema.createTable('firmware_versions', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.uuid('model_id').notNullable().references('models.id');
    t.text('version').notNullable();
    t.specificType('version_key', 'text COLLATE "C"').notNullable();
    t.text('release_notes').notNullable().defaultTo('');
    t.text('changelog').notNullable().defaultTo('');
    t.bigInteger('size').notNullable();
    t.text('sha256').notNullable();
    // Files live under DATA_DIR/firmware/<storage_key>; null once the file was deleted.
    t.text('storage_key');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['model_id', 'version_key']);
    t.index(['account_id', 'model_id', 'version_key']);
  });

  await knex.schema.createTable('deployments', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.uuid('firmware_version_id').notNullable().references('firmware_versions.id');
    t.uuid('model_id').notNullable().references('models.id');
    t.text('target_version').notNullable();
    // kind: deploy | claim | rollback | retry
    t.text('kind').notNullable().defaultTo('deploy');
    t.uuid('parent_deployment_id');
    t.text('status').notNullable();
    t.jsonb('filter').notNullable().defaultTo('{}');
    t.jsonb('rollout');
    t.boolean('respect_maintenance_window').notNullable().defaultTo(false);
    t.integer('target_count').notNullable().defaultTo(0);
    t.integer('current_batch').notNullable().defaultTo(0);
    t.text('paused_reason');
    t.text('created_by');
    t.timestamp('scheduled_at', { useTz: true });
    t.timestamp('started_at', { useTz: true });
    t.timestamp('finished_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['account_id', 'created_at']);
    t.index(['status']);
  });

  // One row per device and deployment; its id is the job_id sent to the device.
  await knex.schema.createTable('device_updates', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable();
    t.uuid('deployment_id').notNullable().references('deployments.id').onDelete('CASCADE');
    t.uuid('device_id').notNullable().references('devices.id').onDelete('CASCADE');
    t.uuid('firmware_version_id').notNullable().references('firmware_versions.id');
    t.text('from_version');
    t.text('target_version').notNullable();
    t.text('state').notNullable();
    t.integer('batch').notNullable().defaultTo(0);
    t.integer('progress').notNullable().defaultTo(0);
    t.text('error');
    t.uuid('superseded_by');
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('sent_at', { useTz: true });
    t.timestamp('state_changed_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('deadline_at', { useTz: true });
    t.timestamp('finished_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('CREATE INDEX device_updates_deployment_state ON device_updates (deployment_id, state)');
  await knex.raw('CREATE INDEX device_updates_device ON device_updates (device_id, created_at DESC)');
  // Two deployments never fight over one device: at most one unfinished update per device.
  await knex.raw(`CREATE UNIQUE INDEX device_updates_one_active ON device_updates (device_id)
    WHERE state IN ('queued','sent','downloading','installing','rebooting')`);
  await knex.raw(`CREATE INDEX device_updates_deadline ON device_updates (deadline_at)
    WHERE state IN ('sent','downloading','installing','rebooting')`);

  await knex.schema.createTable('ledger_entries', (t) => {
    t.bigIncrements('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    // kind: claim_charge | adjustment
    t.text('kind').notNullable();
    t.bigInteger('amount_minor').notNullable();
    t.integer('devices').notNullable().defaultTo(0);
    t.text('reference');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['account_id', 'id']);
  });

  // A threshold of quota or budget is announced once: the primary key makes the insert the guard.
  await knex.schema.createTable('allocation_thresholds_reached', (t) => {
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('kind').notNullable();
    t.integer('percent').notNullable();
    t.timestamp('reached_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'kind', 'percent']);
  });

  // Outbox: written in the same transaction as the state change, dispatched after commit.
  await knex.schema.createTable('events', (t) => {
    t.bigIncrements('seq').primary();
    t.uuid('id').notNullable().unique();
    t.uuid('account_id').notNullable();
    t.text('type').notNullable();
    t.text('subject');
    t.jsonb('data').notNullable();
    t.timestamp('occurred_at', { useTz: true }).notNullable();
    t.timestamp('dispatched_at', { useTz: true });
    t.index(['account_id', 'seq']);
  });
  await knex.raw('CREATE INDEX events_undispatched ON events (seq) WHERE dispatched_at IS NULL');

  await knex.schema.createTable('webhooks', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('url').notNullable();
    t.specificType('event_types', 'text[]').notNullable();
    // The signing secret must be usable to sign, so it is encrypted (AES-GCM), not hashed.
    t.text('secret_ciphertext').notNullable();
    t.text('secret_prefix').notNullable();
    t.boolean('enabled').notNullable().defaultTo(true);
    t.text('disabled_reason');
    t.timestamp('failing_since', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['account_id']);
  });

  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable();
    t.uuid('webhook_id').notNullable().references('webhooks.id').onDelete('CASCADE');
    t.uuid('event_id').notNullable();
    t.bigInteger('event_seq').notNullable();
    t.text('ordering_key');
    // status: pending | delivered | failed (gave up)
    t.text('status').notNullable().defaultTo('pending');
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('next_attempt_at', { useTz: true }).notNullable();
    t.timestamp('locked_until', { useTz: true });
    t.integer('last_status_code');
    t.text('last_error');
    t.integer('last_duration_ms');
    t.timestamp('delivered_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['webhook_id', 'created_at']);
  });
  await knex.raw(
    `CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`,
  );

  await knex.schema.createTable('webhook_delivery_attempts', (t) => {
    t.bigIncrements('id').primary();
    t.uuid('delivery_id').notNullable().references('webhook_deliveries.id').onDelete('CASCADE');
    t.timestamp('attempted_at', { useTz: true }).notNullable();
    t.integer('status_code');
    t.integer('duration_ms').notNullable();
    t.text('error');
    t.index(['delivery_id', 'id']);
  });

  await knex.schema.createTable('idempotency_keys', (t) => {
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('key').notNullable();
    t.text('operation').notNullable();
    t.text('request_hash').notNullable();
    // state: in_progress | done
    t.text('state').notNullable();
    t.integer('response_status');
    t.jsonb('response_body');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'key']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    'idempotency_keys',
    'webhook_delivery_attempts',
    'webhook_deliveries',
    'webhooks',
    'events',
    'allocation_thresholds_reached',
    'ledger_entries',
    'device_updates',
    'deployments',
    'firmware_versions',
    'device_events',
    'device_credentials',
    'devices',
    'models',
    'api_keys',
    'sessions',
    'login_throttle',
    'users',
    'accounts',
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
}
