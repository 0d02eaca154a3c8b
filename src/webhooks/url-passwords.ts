import { sql, type Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import type { Keyring } from '../sealed.ts';
import { sealedAnew } from '../url-password.ts';

type Db = Kysely<Schema>;

/** A column that keeps webhook URLs, in a table whose rows are keyed by `id`. */
interface UrlColumn {
  table: keyof Schema;
  column: string;
}

/** The webhook URLs kept for good, whose passwords a replaced ENCRYPTION_KEY may have sealed. */
const KEPT_FOR_GOOD: readonly UrlColumn[] = [
  { table: 'accounts', column: 'inbound_sms_webhook_url' },
  { table: 'webhook_endpoints', column: 'url' },
];

/**
 * Every column a webhook URL is kept in beyond the streams of events, which are gathered within
 * seconds of their append and keep the URL their append was given.
 */
const KEPT: readonly UrlColumn[] = [
  ...KEPT_FOR_GOOD,
  { table: 'sends', column: 'webhook_url' },
  { table: 'verifications', column: 'webhook_url' },
  { table: 'contact_batches', column: 'webhook_url' },
  { table: 'webhook_deliveries', column: 'url' },
];

/** The settings row migration 0044 leaves when the database may keep URLs whose passwords are in clear. */
export const URL_PASSWORDS_TO_SEAL = 'url_passwords_to_seal';

/**
 * At the start after migration 0044: the passwords in the URLs kept before they were sealed,
 * sealed now (a migration has no key). The tables it changed, whose files must be rid of the
 * clear values; none at every later start, which reads one settings row.
 */
export async function sealClearUrlPasswords(db: Db, keyring: Keyring): Promise<Array<keyof Schema>> {
  const marker = await db
    .selectFrom('settings')
    .select('key')
    .where('key', '=', URL_PASSWORDS_TO_SEAL)
    .executeTakeFirst();
  if (!marker) return [];
  const changed = await sealAnew(db, keyring, KEPT);
  await db.deleteFrom('settings').where('key', '=', URL_PASSWORDS_TO_SEAL).execute();
  return changed;
}

/** The passwords of the URLs kept for good sealed anew under ENCRYPTION_KEY where one it replaced sealed them. */
export async function resealUrlPasswords(db: Db, keyring: Keyring): Promise<void> {
  await sealAnew(db, keyring, KEPT_FOR_GOOD);
}

async function sealAnew(db: Db, keyring: Keyring, columns: readonly UrlColumn[]): Promise<Array<keyof Schema>> {
  const changed: Array<keyof Schema> = [];
  for (const { table, column } of columns) {
    const { rows } = await sql<{ id: string; url: string }>`
      select id, ${sql.ref(column)} as url from ${sql.table(table)} where ${sql.ref(column)} like '%@%'`.execute(db);
    for (const row of rows) {
      const again = sealedAnew(keyring, row.url);
      if (again === undefined) continue;
      await sql`update ${sql.table(table)} set ${sql.ref(column)} = ${again}
                 where id = ${row.id} and ${sql.ref(column)} = ${row.url}`.execute(db);
      if (!changed.includes(table)) changed.push(table);
    }
  }
  return changed;
}
