import { sql, type Kysely, type SqlBool } from 'kysely';
import { chunkOf } from '../db/chunks.ts';
import type { ProcedureDatabase } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import { cursorCodec } from '../http/cursor.ts';

/**
 * The audit log (ARCHITECTURE.md, "Access and integration"; docs/audit.md): who changed what in
 * an account. Each entry is written by recordAudit in the transaction of the change it records,
 * so a change that fails or rolls back leaves none, and one that commits always has its entry.
 */

/**
 * Who made a change: an access token, an API key, the console's session, the operator, or a
 * webhook receiver answering 410 Gone.
 */
export type Actor = 'token' | 'console' | 'admin' | 'receiver' | `apiKey:${string}`;

/** What was changed: the actions the log records (docs/audit.md lists them). */
export const AUDIT_ACTIONS = [
  'apiKey.created',
  'apiKey.revoked',
  'webhookSecret.rotated',
  'webhookEndpoint.created',
  'webhookEndpoint.deleted',
  'webhookEndpoint.disabled',
  'suppression.added',
  'suppression.removed',
  'erasure.requested',
  'contact.deleted',
  'list.deleted',
  'account.updated',
  'account.created',
  'account.password.changed',
  'account.privateToken.rotated',
  'senderName.added',
  'senderDomain.added',
  'dkimKey.rotated',
  'dkimKey.removed',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/**
 * Who made a change, from where, and when: what a request knows before the change, handed to
 * the code that makes it. Plain data, so it crosses to SQLite's thread in a procedure's arguments.
 */
export interface AuditBy {
  actor: Actor;
  ip: string | null;
  at: number;
}

/** One entry. */
export interface AuditEntry extends AuditBy {
  accountId: string;
  action: AuditAction;
  /** An id, or a person's number or address as its keyed hash (never in clear); null: the account. */
  target: string | null;
}

/** Writes the entry, in the transaction of the change it records. */
export async function recordAudit(trx: Kysely<Schema>, entry: AuditEntry): Promise<void> {
  await trx
    .insertInto('audit_entries')
    .values({
      account_id: entry.accountId,
      at: entry.at,
      actor: entry.actor,
      action: entry.action,
      target: entry.target,
      ip: entry.ip,
    })
    .execute();
}

/**
 * Who a request acts as: `apiKey:<apiKeyId>` with an API key, `console` under the console's
 * session, else `token` (an access token). Admin routes record `admin` themselves. The request is
 * taken by shape (auth/bearer.ts decorates it), so this module stays below the domains.
 */
export function actorOf(request: { apiKey: { id: string } | null; consoleSession: string | null }): Actor {
  if (request.apiKey !== null) return `apiKey:${request.apiKey.id}`;
  return request.consoleSession === null ? 'token' : 'console';
}

/** What an account route records: its actor, the caller's address and the time. */
export const auditBy = (
  request: { apiKey: { id: string } | null; consoleSession: string | null; ip: string },
  at: number,
): AuditBy => ({ actor: actorOf(request), ip: request.ip, at });

/** An entry as GET /audit answers it. */
export interface AuditView {
  at: string;
  actor: string;
  action: string;
  target: string | null;
  ip: string | null;
}

const CURSOR = cursorCodec(['integer']);

/** The account's entries, newest first, a page at a time, by (account_id, id). */
export async function listAudit(
  db: Kysely<Schema>,
  accountId: string,
  query: { cursor?: string; limit: number },
): Promise<{ entries: AuditView[]; nextCursor: string | null }> {
  let select = db
    .selectFrom('audit_entries')
    .select(['id', 'at', 'actor', 'action', 'target', 'ip'])
    .where('account_id', '=', accountId);
  if (query.cursor !== undefined) select = select.where('id', '<', CURSOR.decode(query.cursor)[0]);
  const rows = await select
    .orderBy('id', 'desc')
    .limit(query.limit + 1)
    .execute();
  const { rows: shown, nextCursor } = CURSOR.page(rows, query.limit, (last) => [Number(last.id)]);
  return {
    entries: shown.map((row) => ({
      at: new Date(Number(row.at)).toISOString(),
      actor: row.actor,
      action: row.action,
      target: row.target,
      ip: row.ip,
    })),
    nextCursor,
  };
}

/**
 * The retention sweep's purge (messaging/retention.ts): at most `limit` entries older than
 * `before` (AUDIT_RETENTION_DAYS), in one statement; answers how many went.
 */
export async function purgeAuditEntries(
  { db, dialect }: ProcedureDatabase,
  before: number,
  limit: number,
): Promise<number> {
  const old = sql<SqlBool>`at < ${before}`;
  const result = await db
    .deleteFrom('audit_entries')
    .where(old)
    .where(chunkOf(dialect, 'audit_entries', old, limit))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
