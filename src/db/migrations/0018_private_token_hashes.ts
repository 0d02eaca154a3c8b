import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';

/**
 * Accounts keep a hash of their private token, not the token: with the password hash beside
 * it, a copy of the table no longer holds the token POST /token asks for. A random UUID needs
 * no salt or stretching (guessing one is 122 bits of work), so SHA-256 (auth/credentials.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const accounts = await sql<{ id: string; private_token: string }>`select id, private_token from accounts`.execute(db);
  for (const { id, private_token } of accounts.rows) {
    const hash = createHash('sha256').update(private_token.toLowerCase()).digest('hex');
    await sql`update accounts set private_token = ${hash} where id = ${id}`.execute(db);
  }
  await sql`alter table accounts rename column private_token to private_token_hash`.execute(db);
}
