import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { AccountsTable, Schema } from '../db/schema.ts';

/**
 * The account a sign-in names (POST /token, the CLI's --user): user names are compared
 * trimmed and case-insensitively, as they were stored (user_name_key).
 */
export async function findAccountByUserName(db: Kysely<Schema>, userName: string): Promise<Selectable<AccountsTable> | undefined> {
  return db.selectFrom('accounts').selectAll().where('user_name_key', '=', userName.trim().toLowerCase()).executeTakeFirst();
}

/** What an account keeps of its private token (a UUID, compared case-insensitively). */
export function privateTokenHash(privateToken: string): string {
  return createHash('sha256').update(privateToken.toLowerCase()).digest('hex');
}

/** A new private token, and its hash to keep: the token is shown once, at creation or rotation. */
export function newPrivateToken(): { privateToken: string; hash: string } {
  const privateToken = randomUUID();
  return { privateToken, hash: privateTokenHash(privateToken) };
}

export function privateTokenMatches(account: Selectable<AccountsTable>, privateToken: string): boolean {
  return timingSafeEqual(Buffer.from(account.private_token_hash, 'hex'), Buffer.from(privateTokenHash(privateToken), 'hex'));
}
