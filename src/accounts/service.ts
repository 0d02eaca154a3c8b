import { randomUUID } from 'node:crypto';
import type { Insertable, Kysely, Selectable, Updateable } from 'kysely';
import type { Clock } from '../clock.ts';
import type { AccountsTable, Schema } from '../db/schema.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { badRequest, conflict, notFound } from '../errors.ts';
import { hashPassword } from '../auth/passwords.ts';
import { newPrivateToken } from '../auth/credentials.ts';
import { effectiveRateLimits, RATE_LIMIT_GROUPS, type RateLimits } from '../ratelimit/limits.ts';
import { DEFAULT_TIME_ZONE_OFFSET, offsetMinutes } from './time-zone.ts';
import { changedVerifySettings, verifySettings, type VerifySettings } from './verify-settings.ts';
import { storedQuietHours, type QuietHours } from './quiet-hours.ts';
import { createDefaultList } from '../crm/setup.ts';
import { postProcedure } from '../http/idempotency.ts';
import { recordAudit, type AuditAction, type AuditBy } from '../audit/entries.ts';

import { deleteAccountRows, lockAccountRow } from './queries.ts';

type Db = Kysely<Schema>;
export type AccountRow = Selectable<AccountsTable>;

/**
 * What the operator sees of an account (admin API and CLI). The private token only when it was
 * just made (creation, rotation): the account keeps its hash (auth/credentials.ts).
 */
export interface AccountView {
  accountId: string;
  userName: string;
  privateToken?: string;
  timeZoneOffset: string;
  locale: string;
  rateLimits: RateLimits;
  createdAt: string;
}

export function accountView(row: AccountRow, privateToken?: string): AccountView {
  return {
    accountId: row.id,
    userName: row.user_name,
    ...(privateToken === undefined ? {} : { privateToken }),
    timeZoneOffset: row.time_zone_offset,
    locale: row.locale,
    rateLimits: effectiveRateLimits(row.rate_limits),
    createdAt: new Date(row.created_at).toISOString(),
  };
}

const EMAIL = /^[^\s@"(),:;<>[\]\\]+@[^\s@"(),:;<>[\]\\]+\.[^\s@"(),:;<>[\]\\]+$/;

function checkUserName(userName: string): string {
  const trimmed = userName.trim();
  if (!EMAIL.test(trimmed) || trimmed.length > 254) {
    throw badRequest('The user name must be an email address.', [
      { field: 'userName', message: 'must be an email address' },
    ]);
  }
  return trimmed;
}

function checkPassword(password: string): void {
  if (password.length < 10 || password.length > 1024) {
    throw badRequest('The password must be 10 to 1024 characters long.', [
      { field: 'password', message: 'must be 10 to 1024 characters' },
    ]);
  }
}

function checkTimeZoneOffset(value: string): void {
  if (offsetMinutes(value) === undefined) {
    throw badRequest('The time zone offset must look like UTC+05:30~India Standard Time.', [
      {
        field: 'timeZoneOffset',
        message: 'must be UTC<+|->hh:mm~<name>, between UTC-12:00 and UTC+14:00 in quarter hours',
      },
    ]);
  }
}

function checkLocale(value: string): string {
  try {
    const [canonical] = Intl.getCanonicalLocales(value);
    if (canonical) return canonical;
  } catch {
    // fall through to the error below
  }
  throw badRequest('The locale must be a BCP 47 language tag such as en or en-IN.', [
    { field: 'locale', message: 'must be a BCP 47 language tag' },
  ]);
}

function checkRateLimits(limits: Partial<RateLimits>): void {
  for (const [group, value] of Object.entries(limits)) {
    if (!(RATE_LIMIT_GROUPS as readonly string[]).includes(group)) {
      throw badRequest(`Unknown rate-limit group ${group}.`, [
        { field: `rateLimits.${group}`, message: `must be one of ${RATE_LIMIT_GROUPS.join(', ')}` },
      ]);
    }
    if (!Number.isInteger(value) || value < 1 || value > 1_000_000) {
      throw badRequest('A rate limit must be a whole number of requests per minute from 1 to 1000000.', [
        { field: `rateLimits.${group}`, message: 'must be a whole number from 1 to 1000000' },
      ]);
    }
  }
}

export interface NewAccount {
  userName: string;
  password: string;
  timeZoneOffset?: string;
  locale?: string;
}

/**
 * An account's row, checked and ready to insert, and its private token in clear, to show once:
 * plain data, as a procedure's arguments are.
 */
export interface NewAccountRow {
  row: Insertable<AccountsTable> & { created_at: number };
  privateToken: string;
}

/**
 * Checks a new account and hashes its password: argon2 takes about 30 ms of CPU, so it is
 * done before the transaction, which on SQLite holds the only writing connection.
 */
export async function prepareAccount(clock: Clock, input: NewAccount): Promise<NewAccountRow> {
  const userName = checkUserName(input.userName);
  checkPassword(input.password);
  const timeZoneOffset = input.timeZoneOffset ?? DEFAULT_TIME_ZONE_OFFSET;
  checkTimeZoneOffset(timeZoneOffset);
  const locale = checkLocale(input.locale ?? 'en');
  const now = clock.now();
  const { privateToken, hash } = newPrivateToken();
  return {
    row: {
      id: randomUUID(),
      user_name: userName,
      user_name_key: userName.toLowerCase(),
      password_hash: await hashPassword(input.password),
      private_token_hash: hash,
      time_zone_offset: timeZoneOffset,
      locale,
      rate_limits: null,
      created_at: now,
      updated_at: now,
    },
    privateToken,
  };
}

/** The account and its `All contacts` list, in the caller's transaction: every account has one. */
async function insertAccount(trx: Db, { row: account }: NewAccountRow): Promise<AccountRow> {
  try {
    const row = await trx.insertInto('accounts').values(account).returningAll().executeTakeFirstOrThrow();
    await createDefaultList(trx, { now: () => account.created_at }, row.id);
    return row;
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict(`An account with the user name ${account.user_name} already exists.`);
    throw error;
  }
}

/** An account's row with the private token it was just given, which the row keeps only a hash of. */
export type AccountWithToken = AccountRow & { privateToken: string };

export async function createAccount(db: Db, clock: Clock, input: NewAccount, by?: AuditBy): Promise<AccountWithToken> {
  const account = await prepareAccount(clock, input);
  return {
    ...(await db.transaction().execute(async (trx) => {
      const row = await insertAccount(trx, account);
      if (by) await recordAudit(trx, { ...by, accountId: row.id, action: 'account.created', target: null });
      return row;
    })),
    privateToken: account.privateToken,
  };
}

/** POST /admin/accounts, in the request's transaction (http/idempotency.ts), with its audit entry. */
export const postAccount = postProcedure(
  import.meta.url,
  'postAccount',
  async ({ db }, account: NewAccountRow & { by: AuditBy }) => {
    const row = await insertAccount(db, account);
    await recordAudit(db, { ...account.by, accountId: row.id, action: 'account.created', target: null });
    // The record of the answer never holds the token, not even sealed: it is only ever checked.
    return { statusCode: 201, body: accountView(row, account.privateToken), recorded: accountView(row) };
  },
);

export async function listAccounts(db: Db): Promise<AccountRow[]> {
  return db.selectFrom('accounts').selectAll().orderBy('created_at').orderBy('id').execute();
}

export async function findAccountById(db: Db, id: string): Promise<AccountRow | undefined> {
  return db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
}

/** A change to an account, and who made it for the audit log (audit/entries.ts), written in its transaction. */
interface Audited {
  by: AuditBy;
  action: AuditAction;
}

/** An account's change: its id, the values, whether access tokens issued before stop working, its audit. */
type AccountWrite = [id: string, values: Updateable<AccountsTable>, bumpTokenVersion: boolean, audited?: Audited];

/** Writes the change, in a transaction of its own when it is audited (with its audit entry). */
async function updateAccount(db: Db, ...write: AccountWrite): Promise<AccountRow> {
  return write[3] ? db.transaction().execute((trx) => writeAccount(trx, ...write)) : writeAccount(db, ...write);
}

/** Writes the change in the caller's transaction. */
async function writeAccount(db: Db, ...[id, values, bumpTokenVersion, audited]: AccountWrite): Promise<AccountRow> {
  const row = await db
    .updateTable('accounts')
    .set((eb) => ({ ...values, ...(bumpTokenVersion ? { token_version: eb('token_version', '+', 1) } : {}) }))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw notFound('The account');
  if (audited) await recordAudit(db, { ...audited.by, accountId: id, action: audited.action, target: null });
  return row;
}

/** A new private token; every access token issued before it stops working. */
export async function rotatePrivateToken(db: Db, clock: Clock, id: string, by?: AuditBy): Promise<AccountWithToken> {
  const { privateToken, hash } = newPrivateToken();
  const audited = by && { by, action: 'account.privateToken.rotated' as const };
  return {
    ...(await updateAccount(db, id, { private_token_hash: hash, updated_at: clock.now() }, true, audited)),
    privateToken,
  };
}

/** A new password; every access token issued before it stops working. */
export async function setPassword(
  db: Db,
  clock: Clock,
  id: string,
  password: string,
  by?: AuditBy,
): Promise<AccountRow> {
  checkPassword(password);
  const values = { password_hash: await hashPassword(password), updated_at: clock.now() };
  return updateAccount(db, id, values, true, by && { by, action: 'account.password.changed' });
}

export interface AccountSettings {
  timeZoneOffset?: string;
  locale?: string;
  rateLimits?: Partial<RateLimits>;
  /** Where its messages from handsets are posted (sms/inbound.ts); null: nowhere. */
  inboundSmsWebhookUrl?: string | null;
  /** Verify's fraud guard, the fields to change, checked already (verify-settings.ts). */
  verify?: Partial<VerifySettings>;
  /** Smart encoding of SMS texts (sms/smart-encoding.ts). */
  smartEncoding?: boolean;
  /** Quiet hours for batch SMS (quiet-hours.ts); null: off. */
  quietHours?: QuietHours | null;
}

export async function updateAccountSettings(
  db: Db,
  clock: Clock,
  id: string,
  settings: AccountSettings,
  by?: AuditBy,
): Promise<AccountRow> {
  const values: Updateable<AccountsTable> = { updated_at: clock.now() };
  if (settings.timeZoneOffset !== undefined) {
    checkTimeZoneOffset(settings.timeZoneOffset);
    values.time_zone_offset = settings.timeZoneOffset;
  }
  if (settings.locale !== undefined) values.locale = checkLocale(settings.locale);
  if (settings.rateLimits !== undefined) checkRateLimits(settings.rateLimits);
  if (settings.inboundSmsWebhookUrl !== undefined) values.inbound_sms_webhook_url = settings.inboundSmsWebhookUrl;
  if (settings.smartEncoding !== undefined) values.smart_encoding = settings.smartEncoding;
  if (settings.quietHours !== undefined) values.quiet_hours = storedQuietHours(settings.quietHours);
  // The settings stored as one value take the change's fields over the row as it stands under
  // the update's lock, not over a copy read before (a cached account is up to a second old):
  // two changes at once to different fields of one setting both hold.
  return db.transaction().execute(async (trx) => {
    const current = await lockAccountRow(trx, id);
    if (!current) throw notFound('The account');
    if (settings.rateLimits !== undefined) {
      const stored = current.rate_limits ? (JSON.parse(current.rate_limits) as Partial<RateLimits>) : {};
      values.rate_limits = JSON.stringify({ ...stored, ...settings.rateLimits });
    }
    if (settings.verify !== undefined) {
      values.verify = JSON.stringify(changedVerifySettings(verifySettings(current.verify), settings.verify));
    }
    return writeAccount(trx, id, values, false, by && { by, action: 'account.updated' });
  });
}

/**
 * Deletes the account and everything it owns, in one statement. Its rows go by the foreign
 * keys' cascades, but for the rows written per message on PostgreSQL, which have none
 * (migration 0026): their sends' recipients, with the recipients' history and parts, and
 * the sandbox's copies of its messages go in the same statement.
 */
export async function deleteAccount(db: Db, id: string): Promise<void> {
  if (!(await deleteAccountRows(db, id))) throw notFound('The account');
}
