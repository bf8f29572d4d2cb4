import type { Knex } from 'knex';

/**
 * Login throttling per e-mail and client address (core/accounts/login-throttle.ts).
 * The lockout after 10 failures moves here, so guesses from one address lock out that address
 * only, not the user everywhere. `last_success_at` marks the addresses a user has logged in from:
 * the per-e-mail backoff (`login_throttle`) spares them, so nobody elsewhere can keep the owner
 * out. `login_throttle` stays, as that per-e-mail backoff; the lockouts it holds were set under
 * the old rule (10 failures from anywhere) and are lifted.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('login_address_throttle', (t) => {
    t.text('email').notNullable();
    // An IPv4 address, or the /64 prefix of an IPv6 one.
    t.text('address').notNullable();
    t.integer('failures').notNullable().defaultTo(0);
    t.timestamp('window_started_at', { useTz: true }).notNullable();
    t.timestamp('locked_until', { useTz: true });
    t.timestamp('last_success_at', { useTz: true });
    t.primary(['email', 'address']);
  });
  await knex('login_throttle').update({ locked_until: null });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('login_address_throttle');
}
