import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely, Transaction } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Schema } from '../db/schema.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { badRequest, unprocessable } from '../errors.ts';

/** Keys are honoured for 24 hours (as Stripe and Brevo do); after that a key may be reused. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60_000;

export interface Outcome<T> {
  statusCode: number;
  body: T;
}

function requestHash(request: FastifyRequest): string {
  return createHash('sha256')
    .update(`${request.method} ${request.routeOptions.url}\n${JSON.stringify(request.params ?? {})}\n${JSON.stringify(request.body ?? null)}`)
    .digest('base64url');
}

/**
 * Runs a POST's writes in one transaction and, when the request carries an
 * `Idempotency-Key`, stores the response in that same transaction. So the work and the
 * record of it commit together: a retry after a crash either finds both or neither, and
 * a retry that finds the record gets the first response again with nothing redone.
 * Same key with another body → 422. Two concurrent requests with one key: the second's
 * insert conflicts, its transaction (and its work) rolls back, and it replays the first.
 *
 * Every module POST that queues work goes through here; `scope` keeps one account's keys
 * apart from another's. `prepare`, if given, runs first (after a replay is ruled out), outside
 * the transaction, and hands `work` what it read: checks that only read belong there, so
 * the transaction holds its connection (on SQLite, the only one) for the writes alone.
 */
export async function idempotent<T, P = undefined>(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: { db: Kysely<Schema>; clock: Clock },
  scope: string,
  work: (trx: Transaction<Schema>, prepared: P) => Promise<Outcome<T>>,
  prepare?: () => Promise<P>,
): Promise<T> {
  const header = request.headers['idempotency-key'];
  if (header === undefined) {
    const prepared = (await prepare?.()) as P;
    const outcome = await deps.db.transaction().execute((trx) => work(trx, prepared));
    reply.code(outcome.statusCode);
    return outcome.body;
  }
  const key = Array.isArray(header) ? header[0] : header;
  if (key.length < 1 || key.length > 255) {
    throw badRequest('The Idempotency-Key header must be 1 to 255 characters.', [{ field: 'Idempotency-Key', message: 'must be 1 to 255 characters' }]);
  }
  const hash = requestHash(request);

  let prepared: { value: P } | undefined;
  for (let attempt = 1; ; attempt++) {
    const now = deps.clock.now();
    const stored = await deps.db
      .selectFrom('idempotency_keys')
      .select(['request_hash', 'status_code', 'response_body', 'created_at'])
      .where('scope', '=', scope)
      .where('key', '=', key)
      .executeTakeFirst();
    const live = stored && stored.created_at > now - IDEMPOTENCY_TTL_MS ? stored : undefined;
    if (live) {
      if (live.request_hash !== hash) {
        throw unprocessable('This Idempotency-Key was already used with a different request.', [
          { field: 'Idempotency-Key', message: 'was used with another body or path' },
        ]);
      }
      reply.code(live.status_code).header('idempotent-replayed', 'true');
      return JSON.parse(live.response_body) as T;
    }
    prepared ??= { value: (await prepare?.()) as P };
    const { value } = prepared;
    try {
      const outcome = await deps.db.transaction().execute(async (trx) => {
        if (stored) await trx.deleteFrom('idempotency_keys').where('scope', '=', scope).where('key', '=', key).execute();
        // The key is claimed before the work, so a concurrent request with the same key
        // blocks on this row (PostgreSQL) or on the write lock (SQLite) and then conflicts
        // on the key, rather than on whatever unique constraint the work itself touches.
        await trx
          .insertInto('idempotency_keys')
          .values({ scope, key, request_hash: hash, status_code: 0, response_body: '', created_at: now })
          .execute();
        const result = await work(trx, value);
        await trx
          .updateTable('idempotency_keys')
          .set({ status_code: result.statusCode, response_body: JSON.stringify(result.body) })
          .where('scope', '=', scope)
          .where('key', '=', key)
          .execute();
        return result;
      });
      reply.code(outcome.statusCode);
      return outcome.body;
    } catch (error) {
      // Another request with this key committed first: go round once more to replay its
      // response. A second conflict is the work's own, not the key's.
      if (!isUniqueViolation(error) || attempt > 1) throw error;
    }
  }
}

export async function purgeExpiredIdempotencyKeys(db: Kysely<Schema>, clock: Clock): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('created_at', '<=', clock.now() - IDEMPOTENCY_TTL_MS).executeTakeFirst();
  return Number(result.numDeletedRows);
}
