import type { Knex } from 'knex';

/** The device CA the service created, kept in the one row of `device_ca`. */

const ROW_ID = 'device-ca';

/** The CA certificate and its private key sealed under the server secret. */
export interface StoredDeviceCa {
  certificatePem: string;
  sealedKey: string;
}

interface DeviceCaRow {
  certificate_pem: string;
  private_key_sealed: string;
}

export async function selectStoredCa(db: Knex): Promise<StoredDeviceCa | null> {
  const row: DeviceCaRow | undefined = await db('device_ca')
    .where({ id: ROW_ID })
    .first('certificate_pem', 'private_key_sealed');
  return row ? { certificatePem: row.certificate_pem, sealedKey: row.private_key_sealed } : null;
}

/** Stores a CA unless one is stored already (the first writer wins; read it back to know which). */
export async function insertCaUnlessStored(db: Knex, input: { ca: StoredDeviceCa; now: Date }): Promise<void> {
  await db('device_ca')
    .insert({
      id: ROW_ID,
      certificate_pem: input.ca.certificatePem,
      private_key_sealed: input.ca.sealedKey,
      created_at: input.now,
    })
    .onConflict('id')
    .ignore();
}
