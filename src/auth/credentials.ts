import type { Kysely, Selectable } from 'kysely';
import type { AccountsTable, Schema } from '../db/schema.ts';

/**
 * The account a sign-in names (POST /token, the CLI's --user): user names are compared
 * trimmed and case-insensitively, as they were stored (user_name_key).
 */
export async function findAccountByUserName(db: Kysely<Schema>, userName: string): Promise<Selectable<AccountsTable> | undefined> {
  return db.selectFrom('accounts').selectAll().where('user_name_key', '=', userName.trim().toLowerCase()).executeTakeFirst();
}
