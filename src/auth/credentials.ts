import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { AccountsTable, Schema } from '../db/schema.ts';
import { invalidCredentials } from '../errors.ts';
import { DECOY_HASH, verifyPassword } from './passwords.ts';
import type { LoginThrottle } from './throttle.ts';
import type { Log } from '../log.ts';

/**
 * The account a sign-in names (POST /token, the CLI's --user): user names are compared
 * trimmed and case-insensitively, as they were stored (user_name_key).
 */
export async function findAccountByUserName(
  db: Kysely<Schema>,
  userName: string,
): Promise<Selectable<AccountsTable> | undefined> {
  return db
    .selectFrom('accounts')
    .selectAll()
    .where('user_name_key', '=', userName.trim().toLowerCase())
    .executeTakeFirst();
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
  return timingSafeEqual(
    Buffer.from(account.private_token_hash, 'hex'),
    Buffer.from(privateTokenHash(privateToken), 'hex'),
  );
}

export interface Credentials {
  userName: string;
  password: string;
  privateToken: string;
}

/**
 * The account whose three credentials these are, under the sign-in throttle: POST /token and
 * the console's sign-in. A 401 that never tells which of the three was wrong, or a 429.
 */
export async function signIn(
  db: Kysely<Schema>,
  throttle: LoginThrottle,
  credentials: Credentials,
  client: { ip: string; log: Pick<Log, 'warn'> },
): Promise<Selectable<AccountsTable>> {
  const { userName, password, privateToken } = credentials;
  // Counted as failed from here: a wrong one stays so.
  const attempt = await throttle.attempt(userName, client.ip, client.log);
  const account = await findAccountByUserName(db, userName);
  // Always verify a hash, a decoy one for an unknown name, so timing does not tell
  // which of the three credentials was wrong.
  const passwordOk = await verifyPassword(password, account?.password_hash ?? DECOY_HASH);
  if (!account || !passwordOk || !privateTokenMatches(account, privateToken)) throw invalidCredentials();
  await attempt.succeeded();
  return account;
}
