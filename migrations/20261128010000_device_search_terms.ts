import type { Knex } from 'knex';

/**
 * The device list's search terms (serial and name) in a narrow table of their own, with the
 * trigram indexes moved there from `devices`.
 *
 * On `devices` the two GIN indexes made every write that cannot update a row in place (HOT)
 * insert a dozen trigram keys per index: connect and disconnect change `connectivity` and
 * `offline_after`, which the presence sweep's index covers, so each presence change paid them.
 * A presence write of 1,000 devices among 120,000 cost PostgreSQL 123-135 µs per row with the
 * GIN indexes on `devices` and 40 µs without them (measured here). Serial and name change only
 * on claim, rename and unclaim; the table follows them through triggers, so no code path (a claim,
 * a rename, a bulk insert by SQL) can leave it behind.
 *
 * Where pg_trgm cannot be installed (the embedded database) the table exists without the GIN
 * indexes: the same statements run, scanning its narrow rows instead.
 *
 * No index on `account_id`: the planner ANDed it with the trigram bitmaps, reading all 20,000
 * entries of an account to keep 12 matches (6 ms instead of 0.4 ms); the trigram indexes alone
 * find a term's few rows and the account is checked on them. Default statistics, not the 1,000
 * samples `devices` had for the planner's choice between a trigram index and the serial walk
 * (the service makes that choice from the count now): judging an ILIKE against 1,000 samples
 * cost 2.3 ms of planning per search, against 0.9-1.4 ms with the default 100, same plans.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE device_search_terms (
      device_id uuid PRIMARY KEY REFERENCES devices (id) ON DELETE CASCADE,
      account_id uuid NOT NULL,
      serial text NOT NULL,
      name text NOT NULL
    )`);
  await knex.raw(
    'INSERT INTO device_search_terms (device_id, account_id, serial, name) SELECT id, account_id, serial, name FROM devices',
  );
  // A claim inserts up to thousands of devices in one statement: one insert of them all here.
  await knex.raw(`
    CREATE FUNCTION device_search_terms_of_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO device_search_terms (device_id, account_id, serial, name)
      SELECT id, account_id, serial, name FROM inserted_devices;
      RETURN NULL;
    END $$`);
  await knex.raw(`
    CREATE TRIGGER devices_search_terms_insert AFTER INSERT ON devices
      REFERENCING NEW TABLE AS inserted_devices
      FOR EACH STATEMENT EXECUTE FUNCTION device_search_terms_of_inserted()`);
  // Only statements that set one of these columns fire it (heartbeat and presence writes do not).
  await knex.raw(`
    CREATE FUNCTION device_search_terms_of_updated() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE device_search_terms SET account_id = NEW.account_id, serial = NEW.serial, name = NEW.name
       WHERE device_id = NEW.id;
      RETURN NULL;
    END $$`);
  await knex.raw(`
    CREATE TRIGGER devices_search_terms_update AFTER UPDATE OF account_id, serial, name ON devices
      FOR EACH ROW
      WHEN (OLD.account_id IS DISTINCT FROM NEW.account_id OR OLD.serial IS DISTINCT FROM NEW.serial
            OR OLD.name IS DISTINCT FROM NEW.name)
      EXECUTE FUNCTION device_search_terms_of_updated()`);

  const available = await knex.raw<{ rows: unknown[] }>(`SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'`);
  if (available.rows.length > 0) {
    await knex.raw('SAVEPOINT device_search_terms_trigrams');
    try {
      await knex.raw('CREATE EXTENSION IF NOT EXISTS pg_trgm');
      // Without a pending list, as on devices before (migrations/20261127172000_device_search_trigrams.ts).
      await knex.raw(
        'CREATE INDEX device_search_terms_serial_trgm ON device_search_terms USING gin (serial gin_trgm_ops) WITH (fastupdate = off)',
      );
      await knex.raw(
        'CREATE INDEX device_search_terms_name_trgm ON device_search_terms USING gin (name gin_trgm_ops) WITH (fastupdate = off)',
      );
    } catch {
      await knex.raw('ROLLBACK TO SAVEPOINT device_search_terms_trigrams');
    }
    await knex.raw('RELEASE SAVEPOINT device_search_terms_trigrams');
  }
  await knex.raw('DROP INDEX IF EXISTS devices_name_trgm');
  await knex.raw('DROP INDEX IF EXISTS devices_serial_trgm');
  await knex.raw('ALTER TABLE devices ALTER COLUMN name SET STATISTICS -1');
  await knex.raw('ALTER TABLE devices ALTER COLUMN serial SET STATISTICS -1');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER IF EXISTS devices_search_terms_update ON devices');
  await knex.raw('DROP TRIGGER IF EXISTS devices_search_terms_insert ON devices');
  await knex.raw('DROP FUNCTION IF EXISTS device_search_terms_of_updated()');
  await knex.raw('DROP FUNCTION IF EXISTS device_search_terms_of_inserted()');
  await knex.raw('DROP TABLE IF EXISTS device_search_terms');
  const installed = await knex.raw<{ rows: unknown[] }>(`SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'`);
  if (installed.rows.length > 0) {
    await knex.raw(
      'CREATE INDEX IF NOT EXISTS devices_serial_trgm ON devices USING gin (serial gin_trgm_ops) WITH (fastupdate = off)',
    );
    await knex.raw(
      'CREATE INDEX IF NOT EXISTS devices_name_trgm ON devices USING gin (name gin_trgm_ops) WITH (fastupdate = off)',
    );
    await knex.raw('ALTER TABLE devices ALTER COLUMN serial SET STATISTICS 1000');
    await knex.raw('ALTER TABLE devices ALTER COLUMN name SET STATISTICS 1000');
  }
}
