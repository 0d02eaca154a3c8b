import { sql, type ExpressionBuilder, type Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { prepareSealedKey, resealKey, sealedKeyReader, type SealedKey } from '../sealed-keys.ts';
import type { Keyring } from '../sealed.ts';
import { isSealedUrl, sealedIfClear } from '../url-password.ts';

type Db = Kysely<Schema>;

/**
 * The key of the credentials in webhook URLs (url-password.ts): random, kept for good sealed
 * under ENCRYPTION_KEY (sealed-keys.ts), so a URL sealed before ENCRYPTION_KEY is replaced keeps
 * its form and opens after.
 */
const URL_KEY: SealedKey = { row: 'sealed_url_key', purpose: 'herald webhook URL credentials' };

/** The key of webhook URLs' credentials: made by the first process that needs it, then read once per process. */
export const urlKey = sealedKeyReader(URL_KEY, 'webhook URLs’ passwords');

/**
 * At every start (server/stored-secrets.ts), after the key of access tokens opened: the key
 * made if there is none yet. One sealed under an ENCRYPTION_KEY no longer given is replaced
 * while no endpoint's URL nor an account's inbound SMS URL has its password sealed under it
 * (the URLs of sends and deliveries only fail their posts, saying so); while one does, the start
 * stops, as it is more likely the wrong key given than a lost one, and a new key would lose the
 * password for good.
 */
export const prepareUrlKey = (db: Db, keyring: Keyring): Promise<void> =>
  prepareSealedKey(
    db,
    keyring,
    URL_KEY,
    () => urlKey(db, keyring),
    async () => {
      for (const kept of KEPT.filter((kept) => kept.small))
        if ((await urlsWithCredentials(db, kept)).some((row) => isSealedUrl(row.url))) return true;
      return false;
    },
  );

/** The key sealed anew under the current ENCRYPTION_KEY if one it replaced sealed it. */
export const resealUrlKey = (db: Db, keyring: Keyring): Promise<void> => resealKey(db, keyring, URL_KEY);

/** Every column a webhook URL is kept in, in tables whose rows are keyed by `id`, but the streams of events. */
const KEPT: ReadonlyArray<{ table: keyof Schema; column: string; small?: true }> = [
  { table: 'accounts', column: 'inbound_sms_webhook_url', small: true },
  { table: 'webhook_endpoints', column: 'url', small: true },
  { table: 'sends', column: 'webhook_url' },
  { table: 'verifications', column: 'webhook_url' },
  { table: 'contact_batches', column: 'webhook_url' },
  { table: 'webhook_deliveries', column: 'url' },
];

/** The rows of a KEPT column whose URL has a user name or password, clear or sealed. */
async function urlsWithCredentials(db: Db, { table, column }: (typeof KEPT)[number]) {
  const { rows } = await sql<{ id: string; url: string }>`
    select id, ${sql.ref(column)} as url from ${sql.table(table)} where ${sql.ref(column)} like '%@%'`.execute(db);
  return rows;
}

/**
 * The settings row migration 0044 leaves when the database may keep URLs whose credentials are
 * in clear: its value is when a start first sealed them ('1' until one has).
 */
export const URL_CREDENTIALS_TO_SEAL = 'url_passwords_to_seal';

/**
 * How long a rolling upgrade (docs/operations.md) may still have processes of the code before
 * 0044 at work, writing URLs in clear: the starts after the first seal them again, and the
 * settings row goes with the first start after it that finds none.
 */
const UPGRADE_WINDOW_MS = 60 * 60_000;

/**
 * At the starts after migration 0044: the credentials in the URLs kept before they were sealed,
 * or written since by a process not yet upgraded, sealed now (a migration has no key). The
 * tables whose files must be rid of the clear values: every one it changed at the first start,
 * which may stop the service as long as it takes; at a later one, while other processes serve,
 * only the small ones (a large table's old row versions are written over in time, not erased,
 * so that no start locks it for the length of a copy). None once the row is gone, when a start
 * reads only that. A stream of events appended before keeps its URL: its gather seals it in the
 * deliveries it makes (events.ts).
 */
export async function sealClearUrls(db: Db, keyring: Keyring, now: number): Promise<Array<keyof Schema>> {
  const marked = (eb: ExpressionBuilder<Schema, 'settings'>) => eb('key', '=', URL_CREDENTIALS_TO_SEAL);
  const marker = await db.selectFrom('settings').select('value').where(marked).executeTakeFirst();
  if (!marker) return [];
  const firstStart = marker.value === '1';
  const key = await urlKey(db, keyring);
  const changed: Array<(typeof KEPT)[number]> = [];
  for (const kept of KEPT) {
    const { table, column } = kept;
    for (const row of await urlsWithCredentials(db, kept)) {
      const sealed = sealedIfClear(key, row.url);
      if (sealed === undefined) continue;
      await sql`update ${sql.table(table)} set ${sql.ref(column)} = ${sealed}
                 where id = ${row.id} and ${sql.ref(column)} = ${row.url}`.execute(db);
      if (!changed.includes(kept)) changed.push(kept);
    }
  }
  if (firstStart)
    await db
      .updateTable('settings')
      .set({ value: String(now) })
      .where(marked)
      .execute();
  else if (changed.length === 0 && now - Number(marker.value) >= UPGRADE_WINDOW_MS)
    await db.deleteFrom('settings').where(marked).execute();
  return changed.filter((kept) => firstStart || kept.small).map((kept) => kept.table);
}
