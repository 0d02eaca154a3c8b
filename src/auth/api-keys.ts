import { randomBytes, randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { postProcedure, type Outcome } from '../http/idempotency.ts';
import { tokenHash } from './token-hash.ts';
import { recordAudit, type AuditBy } from '../audit/entries.ts';

/**
 * What a key may do (ARCHITECTURE.md, "Access and integration"). Each account route names the
 * scope that lets a key call it in its config (`scope`); access tokens and console sessions
 * hold every scope.
 */
export const SCOPES = [
  'sms:send',
  'email:send',
  'contacts:write',
  'suppressions',
  'verify',
  'read',
  'webhooks',
  'privacy',
  'account',
] as const;
export type Scope = (typeof SCOPES)[number];

/**
 * The scope a route declares: one scope, or the few that each let a key in (a GET that is both
 * `read` and `verify`'s stats); `[]` for the routes no key may call (keys never manage keys).
 */
export type RouteScope = Scope | readonly Scope[];

export const scopesOf = (declared: RouteScope): readonly Scope[] =>
  typeof declared === 'string' ? [declared] : declared;

/** Keys begin so, for secret scanners (GitHub's, gitleaks) to find a leaked one by a pattern. */
export const KEY_PREFIX = 'hk_';

/** A new key: `hk_` and 32 random bytes in base64url (43 characters). */
export const newApiKey = (): string => KEY_PREFIX + randomBytes(32).toString('base64url');

/** A bearer without a key's shape is refused without being looked up. */
const KEY_SHAPE = new RegExp(`^${KEY_PREFIX}[A-Za-z0-9_-]{43}$`);
export const hasApiKeyShape = (token: string): boolean => KEY_SHAPE.test(token);

/**
 * What the database keeps of a key: its SHA-256. A password needs a slow, salted hash because it
 * is guessable; a key is 256 random bits, so no dictionary or brute force can find one from its
 * hash, and a fast hash costs the bearer check under a microsecond on every request (the same
 * hash the access cache keys tokens by, so a key is hashed once per request).
 */
export const apiKeyHash = tokenHash;

/** lastUsedAt is written at most once a minute per key: a write per request would double every request's cost. */
export const LAST_USED_EVERY_MS = 60_000;

export interface ApiKeyView {
  apiKeyId: string;
  name: string;
  scopes: Scope[];
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
}

type ApiKeyRow = Pick<Schema['api_keys'], 'id' | 'name' | 'scopes' | 'created_at' | 'expires_at' | 'last_used_at'>;

const iso = (ms: number | string | null) => (ms === null ? null : new Date(Number(ms)).toISOString());

export function apiKeyView(row: ApiKeyRow): ApiKeyView {
  return {
    apiKeyId: row.id,
    name: row.name,
    scopes: JSON.parse(row.scopes) as Scope[],
    createdAt: iso(row.created_at)!,
    expiresAt: iso(row.expires_at),
    lastUsedAt: iso(row.last_used_at),
  };
}

/** The scopes given, once each, in the order of SCOPES: the same set always reads the same. */
export const normalisedScopes = (scopes: readonly Scope[]): Scope[] => SCOPES.filter((s) => scopes.includes(s));

export interface NewApiKey {
  id: string;
  accountId: string;
  name: string;
  scopes: Scope[];
  /** The key in clear: answered once, never written. */
  key: string;
  createdAt: number;
  expiresAt: number | null;
  /** Who made it, for the audit log. */
  by: AuditBy;
}

/** Everything but the key's hash is made before (prepareApiKey), so a replay of the request finds the same. */
export function prepareApiKey(
  accountId: string,
  body: { name: string; scopes: readonly Scope[]; expiresAt?: string },
  by: AuditBy,
): NewApiKey {
  const now = by.at;
  return {
    id: randomUUID(),
    accountId,
    name: body.name,
    scopes: normalisedScopes(body.scopes),
    key: newApiKey(),
    createdAt: now,
    expiresAt: body.expiresAt === undefined ? null : Date.parse(body.expiresAt),
    by,
  };
}

/**
 * Stores the key's hash and answers the key once: the record an Idempotency-Key keeps (and
 * replays) is the same body without it, so the key is never written, not even sealed.
 */
export const postApiKey = postProcedure(
  import.meta.url,
  'postApiKey',
  async ({ db }, key: NewApiKey): Promise<Outcome<ApiKeyView & { key?: string }>> => {
    await db
      .insertInto('api_keys')
      .values({
        id: key.id,
        account_id: key.accountId,
        name: key.name,
        scopes: JSON.stringify(key.scopes),
        key_hash: apiKeyHash(key.key),
        created_at: key.createdAt,
        expires_at: key.expiresAt,
        last_used_at: null,
      })
      .execute();
    await recordAudit(db, { ...key.by, accountId: key.accountId, action: 'apiKey.created', target: key.id });
    const view = apiKeyView({
      id: key.id,
      name: key.name,
      scopes: JSON.stringify(key.scopes),
      created_at: key.createdAt,
      expires_at: key.expiresAt,
      last_used_at: null,
    });
    const { lastUsedAt: _, ...created } = view;
    return {
      statusCode: 201,
      body: { ...created, key: key.key } as ApiKeyView & { key?: string },
      recorded: created as ApiKeyView,
    };
  },
);

export async function listApiKeys(db: Kysely<Schema>, accountId: string): Promise<ApiKeyView[]> {
  const rows = await db
    .selectFrom('api_keys')
    .select(['id', 'name', 'scopes', 'created_at', 'expires_at', 'last_used_at'])
    .where('account_id', '=', accountId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map(apiKeyView);
}

/**
 * Deletes the account's key, with its audit entry; answers its hash (for the access cache to
 * forget), or undefined if it has none so.
 */
export async function revokeApiKey(
  db: Kysely<Schema>,
  accountId: string,
  id: string,
  by: AuditBy,
): Promise<string | undefined> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .deleteFrom('api_keys')
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .returning('key_hash')
      .executeTakeFirst();
    if (row) await recordAudit(trx, { ...by, accountId, action: 'apiKey.revoked', target: id });
    return row?.key_hash;
  });
}

/** A key as the bearer check needs it. */
export interface KnownApiKey {
  id: string;
  accountId: string;
  scopes: ReadonlySet<Scope>;
  expiresAt: number | null;
  lastUsedAt: number | null;
}

export async function findApiKey(db: Kysely<Schema>, hash: string): Promise<KnownApiKey | undefined> {
  const row = await db
    .selectFrom('api_keys')
    .select(['id', 'account_id', 'scopes', 'expires_at', 'last_used_at'])
    .where('key_hash', '=', hash)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    id: row.id,
    accountId: row.account_id,
    scopes: new Set(JSON.parse(row.scopes) as Scope[]),
    expiresAt: row.expires_at === null ? null : Number(row.expires_at),
    lastUsedAt: row.last_used_at === null ? null : Number(row.last_used_at),
  };
}

/**
 * Records the key's use, unless it was recorded less than a minute ago by any process: the
 * condition makes two processes (or two requests missing the cache at once) write once.
 */
export async function recordApiKeyUse(db: Kysely<Schema>, id: string, now: number): Promise<void> {
  await db
    .updateTable('api_keys')
    .set({ last_used_at: now })
    .where('id', '=', id)
    .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<=', now - LAST_USED_EVERY_MS)]))
    .execute();
}
