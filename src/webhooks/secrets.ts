import { createHmac, randomBytes } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Schema, WebhookSecretsTable } from '../db/schema.ts';
import { postProcedure } from '../http/idempotency.ts';

type SecretRow = Selectable<WebhookSecretsTable>;

const PREFIX = 'whsec_';
// Standard Webhooks ("Signature scheme"): a symmetric secret is at least 24 random bytes,
// shown Base64-encoded after `whsec_`.
const SECRET_BYTES = 32;
/** How long the secret replaced by a rotation keeps signing beside the new one. */
export const PREVIOUS_SECRET_TTL_MS = 24 * 60 * 60_000;

export interface SecretView {
  secret: string;
  /** While the rotated-out secret still signs; null outside a rotation. */
  previousSecretExpiresAt: string | null;
}

function newSecret(): string {
  return PREFIX + randomBytes(SECRET_BYTES).toString('base64');
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

/** The secrets that sign now: the current one, and the previous one until it expires. */
export function signingSecrets(row: SecretRow, now: number): string[] {
  const previousLives = row.previous_secret !== null && row.previous_expires_at !== null && row.previous_expires_at > now;
  return previousLives ? [row.secret, row.previous_secret!] : [row.secret];
}

export function secretView(row: SecretRow, now: number): SecretView {
  const previousLives = signingSecrets(row, now).length > 1;
  return { secret: row.secret, previousSecretExpiresAt: previousLives ? new Date(row.previous_expires_at!).toISOString() : null };
}

/** The account's secret, created on first use; two racing first uses agree on one. */
export async function ensureSecret(db: Kysely<Schema>, clock: Clock, accountId: string): Promise<SecretRow> {
  const existing = await db.selectFrom('webhook_secrets').selectAll().where('account_id', '=', accountId).executeTakeFirst();
  if (existing) return existing;
  await db
    .insertInto('webhook_secrets')
    .values({ account_id: accountId, secret: newSecret(), previous_secret: null, previous_expires_at: null, created_at: clock.now(), rotated_at: null })
    .onConflict((oc) => oc.column('account_id').doNothing())
    .execute();
  return db.selectFrom('webhook_secrets').selectAll().where('account_id', '=', accountId).executeTakeFirstOrThrow();
}

/**
 * A new current secret; the old one keeps signing for PREVIOUS_SECRET_TTL_MS. One UPDATE
 * moves `secret` into `previous_secret` (SET reads the row's old values), so two racing
 * rotations cannot both keep the same previous secret and lose the first one's new secret.
 * A second rotation within the window drops the oldest secret.
 */
export async function rotateSecret(db: Kysely<Schema>, clock: Clock, accountId: string): Promise<SecretRow> {
  await ensureSecret(db, clock, accountId);
  const now = clock.now();
  return db
    .updateTable('webhook_secrets')
    .set((eb) => ({ previous_secret: eb.ref('secret'), secret: newSecret(), previous_expires_at: now + PREVIOUS_SECRET_TTL_MS, rotated_at: now }))
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** POST /webhooks/secret/rotate, in the request's transaction (http/idempotency.ts). */
export const postSecretRotation = postProcedure(import.meta.url, 'postSecretRotation', async ({ db }, args: { accountId: string; now: number }) => ({
  statusCode: 200,
  body: secretView(await rotateSecret(db, { now: () => args.now }, args.accountId), args.now),
}));
