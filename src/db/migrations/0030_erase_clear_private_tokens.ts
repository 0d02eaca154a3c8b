import { sql, type Kysely } from 'kysely';
import { ERASE_PENDING } from '../erase.ts';

/**
 * Migration 0018 replaced each private token by its hash, and the token in clear stayed in the
 * dead version of its row (PostgreSQL) or a freed cell (SQLite) until written over. A migration
 * cannot rewrite the files (VACUUM refuses a transaction): it leaves the table to the next
 * start's erasure (stored-secrets.ts). A database with no account yet had no token to leave.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`insert into settings (key, value)
            select ${ERASE_PENDING}, ${JSON.stringify(['accounts'])}
             where exists (select 1 from accounts)`.execute(db);
}
