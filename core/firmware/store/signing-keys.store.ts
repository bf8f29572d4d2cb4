import type { Knex } from 'knex';
import type { Db } from '../../db/db';

/** A signing key as stored: the public half (PEM) and when it was replaced. */
export interface SigningKeyRecord {
  keyId: string;
  publicKey: string;
  createdAt: Date;
  retiredAt: Date | null;
}

interface SigningKeyRow {
  account_id: string;
  id: string;
  public_key: string;
  created_at: Date;
  retired_at: Date | null;
}

const toSigningKeyRecord = (row: SigningKeyRow): SigningKeyRecord => ({
  keyId: row.id,
  publicKey: row.public_key,
  createdAt: new Date(row.created_at),
  retiredAt: row.retired_at ? new Date(row.retired_at) : null,
});

/** Every key of the account: the current one first, then the retired ones, newest first. */
export async function listSigningKeys(db: Db, accountId: string): Promise<SigningKeyRecord[]> {
  const rows = await db<SigningKeyRow>('firmware_signing_keys')
    .where({ account_id: accountId })
    .orderByRaw('retired_at DESC NULLS FIRST')
    .orderBy('created_at', 'desc');
  return rows.map(toSigningKeyRecord);
}

/** The key not retired (at most one per account), or null. */
export async function currentSigningKey(
  db: Db,
  accountId: string,
): Promise<{ keyId: string; publicKey: string } | null> {
  const row: Pick<SigningKeyRow, 'id' | 'public_key'> | undefined = await db('firmware_signing_keys')
    .where({ account_id: accountId })
    .whereNull('retired_at')
    .first('id', 'public_key');
  return row ? { keyId: row.id, publicKey: row.public_key } : null;
}

export async function retireSigningKey(
  trx: Knex.Transaction,
  input: { accountId: string; keyId: string; at: Date },
): Promise<void> {
  await trx('firmware_signing_keys')
    .where({ account_id: input.accountId, id: input.keyId })
    .update({ retired_at: input.at });
}

/** Stores the key as current; a key registered before (retired) becomes current again. */
export async function saveCurrentSigningKey(
  trx: Knex.Transaction,
  input: { accountId: string; keyId: string; publicKey: string; at: Date },
): Promise<void> {
  await trx('firmware_signing_keys')
    .insert({
      account_id: input.accountId,
      id: input.keyId,
      public_key: input.publicKey,
      created_at: input.at,
      retired_at: null,
    })
    .onConflict(['account_id', 'id'])
    .merge({ retired_at: null });
}
