import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';

/** The cookie that carries a console session's secret. */
export const SESSION_COOKIE = 'herald_console';

/** A sign-in lasts a working day; then the console asks again. */
export const SESSION_TTL_MS = 12 * 3_600_000;

const hashOf = (secret: string) => createHash('sha256').update(secret).digest('hex');

/**
 * The token a change made under the session must carry in X-CSRF-Token. It is derived from the
 * session's secret, which only the cookie holds: a page of another origin can make the browser
 * send the cookie (were SameSite not strict) but cannot read it, so it cannot know the token.
 */
export function csrfTokenFor(secret: string): string {
  return createHash('sha256').update('herald console csrf\0').update(secret).digest('base64url');
}

/** A new session for the account, its secret for the cookie; sessions that have expired are removed on the way. */
export async function openSession(
  db: Kysely<Schema>,
  account: { id: string; token_version: number },
  now: number,
): Promise<string> {
  const secret = randomBytes(32).toString('base64url');
  await db.deleteFrom('console_sessions').where('expires_at', '<=', now).execute();
  await db
    .insertInto('console_sessions')
    .values({
      id_hash: hashOf(secret),
      account_id: account.id,
      token_version: account.token_version,
      created_at: now,
      expires_at: now + SESSION_TTL_MS,
    })
    .execute();
  return secret;
}

/** The account and token version a live session speaks for. */
export async function findSession(
  db: Kysely<Schema>,
  secret: string,
  now: number,
): Promise<{ accountId: string; tokenVersion: number } | undefined> {
  const row = await db
    .selectFrom('console_sessions')
    .select(['account_id', 'token_version'])
    .where('id_hash', '=', hashOf(secret))
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return row && { accountId: row.account_id, tokenVersion: Number(row.token_version) };
}

export async function closeSession(db: Kysely<Schema>, secret: string): Promise<void> {
  await db.deleteFrom('console_sessions').where('id_hash', '=', hashOf(secret)).execute();
}
