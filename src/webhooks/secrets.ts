import { createHmac, randomBytes } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Schema, WebhookSecretsTable } from '../db/schema.ts';
import { conflict } from '../errors.ts';
import { postProcedure } from '../http/idempotency.ts';
import { recordAudit, type AuditBy } from '../audit/entries.ts';
import { resealed, seal, tryOpen, type Keyring } from '../sealed.ts';

type Db = Kysely<Schema>;
type SecretRow = Selectable<WebhookSecretsTable>;

const PREFIX = 'whsec_';
// Standard Webhooks ("Signature scheme"): a symmetric secret is at least 24 random bytes,
// shown Base64-encoded after `whsec_`.
const SECRET_BYTES = 32;
/** How long the secret replaced by a rotation keeps signing beside the new one. */
export const PREVIOUS_SECRET_TTL_MS = 24 * 60 * 60_000;

/**
 * The secrets rest sealed under a key of their own, derived from ENCRYPTION_KEY: a copy of the
 * database alone forges no webhook. Both of an account's share its place, so a rotation moves
 * the current one, sealed as it is, to the previous; copied to another account's row, neither opens.
 */
const sealingKey = (keyring: Keyring) => keyring.derive('herald webhook secrets');
const place = (accountId: string) => `webhook_secrets:${accountId}`;

/** An account's secrets, opened. */
export interface AccountSecrets {
  secret: string;
  /** The secret the last rotation replaced; it signs too until previousExpiresAt. */
  previousSecret: string | null;
  previousExpiresAt: number | null;
}

export interface SecretView {
  secret: string;
  /** While the rotated-out secret still signs; null outside a rotation. */
  previousSecretExpiresAt: string | null;
}

/** A new secret, in clear to show and sealed to keep: plain data, as a procedure's arguments are. */
export interface NewSecret {
  secret: string;
  sealed: string;
}

export function newSecret(keyring: Keyring, accountId: string): NewSecret {
  const secret = PREFIX + randomBytes(SECRET_BYTES).toString('base64');
  return { secret, sealed: seal(sealingKey(keyring).current, secret, place(accountId)) };
}

/**
 * A clear column is set only by a process on the code before migration 0027 after the row was
 * sealed: the newer. A secret sealed under an ENCRYPTION_KEY since lost opens no more: the
 * current one answers 409, asking for a rotation, and the previous one, which that rotation
 * leaves behind, signs no more.
 */
function opened(keyring: Keyring, row: SecretRow): AccountSecrets {
  const reveal = (sealed: string | null) =>
    sealed === null ? undefined : tryOpen(sealingKey(keyring), sealed, place(row.account_id));
  const secret = row.secret ?? reveal(row.sealed_secret);
  if (secret === undefined) {
    throw conflict(
      'The webhook secret was sealed under an ENCRYPTION_KEY this service no longer holds: ' +
        'rotate it (POST /webhooks/secret/rotate).',
    );
  }
  const previousSecret = row.previous_secret ?? reveal(row.sealed_previous_secret) ?? null;
  return { secret, previousSecret, previousExpiresAt: row.previous_expires_at };
}

/**
 * The `webhook-signature` value: `v1,<Base64 HMAC-SHA256 of "id.timestamp.body">` keyed by
 * each secret's decoded bytes, space-separated when several sign (Standard Webhooks allows
 * several so that receivers survive a rotation).
 */
export function signatureHeader(secrets: string[], messageId: string, timestampSeconds: number, body: string): string {
  return secrets
    .map((secret) => {
      const key = Buffer.from(secret.slice(PREFIX.length), 'base64');
      return `v1,${createHmac('sha256', key).update(`${messageId}.${timestampSeconds}.${body}`).digest('base64')}`;
    })
    .join(' ');
}

/** Whether a previous secret (sealed or not) still signs. */
const previousSigns = (previous: string | null, expiresAt: number | null, now: number) =>
  previous !== null && expiresAt !== null && expiresAt > now;

const expiryView = (signs: boolean, expiresAt: number | null) => (signs ? new Date(expiresAt!).toISOString() : null);

/** The secrets that sign now: the current one, and the previous one until it expires. */
export function signingSecrets(secrets: AccountSecrets, now: number): string[] {
  const { secret, previousSecret, previousExpiresAt } = secrets;
  return previousSigns(previousSecret, previousExpiresAt, now) ? [secret, previousSecret!] : [secret];
}

export function secretView(secrets: AccountSecrets, now: number): SecretView {
  const signs = previousSigns(secrets.previousSecret, secrets.previousExpiresAt, now);
  return { secret: secrets.secret, previousSecretExpiresAt: expiryView(signs, secrets.previousExpiresAt) };
}

/** The account's secrets, the first made on first use; two racing first uses agree on one. */
export async function ensureSecret(db: Db, keyring: Keyring, clock: Clock, accountId: string): Promise<AccountSecrets> {
  const row = () => db.selectFrom('webhook_secrets').selectAll().where('account_id', '=', accountId);
  const existing = await row().executeTakeFirst();
  if (existing) return opened(keyring, existing);
  await db
    .insertInto('webhook_secrets')
    .values({
      account_id: accountId,
      sealed_secret: newSecret(keyring, accountId).sealed,
      sealed_previous_secret: null,
      previous_expires_at: null,
      created_at: clock.now(),
      rotated_at: null,
    })
    .onConflict((oc) => oc.column('account_id').doNothing())
    .execute();
  return opened(keyring, await row().executeTakeFirstOrThrow());
}

/**
 * `next` becomes the current secret; the one it replaces keeps signing for
 * PREVIOUS_SECRET_TTL_MS. One statement moves the current secret into the previous one (SET
 * reads the row's old values), so two racing rotations cannot both keep the same previous
 * secret and lose the first one's new secret. A second rotation within the window drops the
 * oldest secret. An account without a secret yet gets `next` alone.
 */
export async function rotateSecret(db: Db, accountId: string, next: NewSecret, now: number): Promise<SecretView> {
  const row = await db
    .insertInto('webhook_secrets')
    .values({
      account_id: accountId,
      sealed_secret: next.sealed,
      sealed_previous_secret: null,
      previous_expires_at: null,
      created_at: now,
      rotated_at: now,
    })
    .onConflict((oc) =>
      oc.column('account_id').doUpdateSet((eb) => ({
        sealed_previous_secret: eb.ref('webhook_secrets.sealed_secret'),
        previous_secret: eb.ref('webhook_secrets.secret'),
        sealed_secret: eb.ref('excluded.sealed_secret'),
        secret: null,
        previous_expires_at: now + PREVIOUS_SECRET_TTL_MS,
        rotated_at: now,
      })),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
  const signs = previousSigns(row.sealed_previous_secret ?? row.previous_secret, row.previous_expires_at, now);
  return { secret: next.secret, previousSecretExpiresAt: expiryView(signs, row.previous_expires_at) };
}

/** POST /webhooks/secret/rotate, in the request's transaction (http/idempotency.ts), with its audit entry. */
export const postSecretRotation = postProcedure(
  import.meta.url,
  'postSecretRotation',
  async ({ db }, args: { accountId: string; next: NewSecret; by: AuditBy }) => {
    const body = await rotateSecret(db, args.accountId, args.next, args.by.at);
    await recordAudit(db, { ...args.by, accountId: args.accountId, action: 'webhookSecret.rotated', target: null });
    return { statusCode: 200, body };
  },
);

/**
 * The secrets the code before migration 0027 (or a process still on it) left in clear, sealed,
 * their clear columns emptied; true if there were any. Each row is changed only as it was
 * read, so a rotation meanwhile is not undone (the next start seals what it left).
 */
export async function sealWebhookSecrets(db: Db, keyring: Keyring): Promise<boolean> {
  const rows = await db
    .selectFrom('webhook_secrets')
    .select(['account_id', 'secret', 'previous_secret'])
    .where((eb) => eb.or([eb('secret', 'is not', null), eb('previous_secret', 'is not', null)]))
    .execute();
  for (const row of rows) {
    const sealed = (clear: string) => seal(sealingKey(keyring).current, clear, place(row.account_id));
    const { secret, previous_secret: previous } = row;
    await db
      .updateTable('webhook_secrets')
      .set({
        ...(secret !== null && { sealed_secret: sealed(secret), secret: null }),
        ...(previous !== null && { sealed_previous_secret: sealed(previous), previous_secret: null }),
      })
      .where('account_id', '=', row.account_id)
      .where('secret', 'is not distinct from', row.secret)
      .where('previous_secret', 'is not distinct from', row.previous_secret)
      .execute();
  }
  return rows.length > 0;
}

/** The secrets sealed anew under the current ENCRYPTION_KEY where one it replaced sealed them (sealed.ts, resealed). */
export async function resealWebhookSecrets(db: Db, keyring: Keyring): Promise<void> {
  const rows = await db
    .selectFrom('webhook_secrets')
    .select(['account_id', 'sealed_secret', 'sealed_previous_secret'])
    .execute();
  for (const row of rows) {
    const again = (sealed: string | null) =>
      sealed === null ? undefined : resealed(sealingKey(keyring), sealed, place(row.account_id));
    const secret = again(row.sealed_secret);
    const previous = again(row.sealed_previous_secret);
    if (!secret && !previous) continue;
    await db
      .updateTable('webhook_secrets')
      .set({ ...(secret && { sealed_secret: secret }), ...(previous && { sealed_previous_secret: previous }) })
      .where('account_id', '=', row.account_id)
      .where('sealed_secret', 'is not distinct from', row.sealed_secret)
      .where('sealed_previous_secret', 'is not distinct from', row.sealed_previous_secret)
      .execute();
  }
}
