import { sql, type Kysely } from 'kysely';

/**
 * Webhook URLs were kept as given, a password in one too; they are now kept with it sealed
 * (url-password.ts). A migration has no key: it leaves the sealing of those kept before to the
 * next start (webhooks/url-passwords.ts). A database with no account yet kept none.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`insert into settings (key, value)
            select 'url_passwords_to_seal', '1' where exists (select 1 from accounts)`.execute(db);
}
