import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely, Transaction } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import { loadProcedure, procedure, type Procedure, type ProcedureRef } from '../db/procedure.ts';
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

/** The key a request claims, in the transaction of its work. */
interface KeyClaim {
  scope: string;
  key: string;
  hash: string;
  now: number;
  /** An expired record of the key is there, to be replaced. */
  replace: boolean;
}

/**
 * The request's writes and, when it has a key, the record of its response, in one
 * transaction. The key is claimed before the work, so a concurrent request with the same
 * key blocks on this row (PostgreSQL) or on the write lock (SQLite) and then conflicts on
 * the key, rather than on whatever unique constraint the work itself touches.
 */
async function keyedTransaction<T>(db: Kysely<Schema>, claim: KeyClaim | undefined, work: (trx: Transaction<Schema>) => Promise<Outcome<T>>): Promise<Outcome<T>> {
  return db.transaction().execute(async (trx) => {
    if (claim) {
      const { scope, key } = claim;
      if (claim.replace) await trx.deleteFrom('idempotency_keys').where('scope', '=', scope).where('key', '=', key).execute();
      await trx.insertInto('idempotency_keys').values({ scope, key, request_hash: claim.hash, status_code: 0, response_body: '', created_at: claim.now }).execute();
    }
    const result = await work(trx);
    if (claim) {
      await trx
        .updateTable('idempotency_keys')
        .set({ status_code: result.statusCode, response_body: JSON.stringify(result.body) })
        .where('scope', '=', claim.scope)
        .where('key', '=', claim.key)
        .execute();
    }
    return result;
  });
}

/** keyedTransaction with a procedure for the work, the whole transaction run where the data is (db/procedure.ts). */
export const keyedProcedure = procedure(
  import.meta.url,
  'keyedProcedure',
  async (database, { claim, work, args }: { claim: KeyClaim | undefined; work: ProcedureRef; args: unknown }) => {
    const run = await loadProcedure(work);
    return keyedTransaction(database.db, claim, (trx) => run.run({ db: trx, dialect: database.dialect }, args) as Promise<Outcome<unknown>>);
  },
);

/** A POST's writes: a function of the transaction, or a procedure given the transaction as its database. */
export type Work<T, P> = ((trx: Transaction<Schema>, prepared: P) => Promise<Outcome<T>>) | Procedure<P, Outcome<T>>;

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
 * the transaction, and hands `work` what it read: checks that only read belong there. Work
 * given as a procedure runs, with its transaction, where the data is: on SQLite a
 * transaction sent a statement at a time holds the one writing connection while the main
 * thread is busy with other requests between its statements.
 */
export async function idempotent<T, P = undefined>(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: { database: Database; clock: Clock },
  scope: string,
  work: Work<T, P>,
  prepare?: () => Promise<P>,
): Promise<T> {
  const { database } = deps;
  const transact = (claim: KeyClaim | undefined, prepared: P): Promise<Outcome<T>> =>
    typeof work === 'function'
      ? keyedTransaction(database.db, claim, (trx) => work(trx, prepared))
      : (database.call(keyedProcedure, { claim, work: { module: work.module, name: work.name }, args: prepared }) as Promise<Outcome<T>>);

  const header = request.headers['idempotency-key'];
  if (header === undefined) {
    const outcome = await transact(undefined, (await prepare?.()) as P);
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
    const stored = await database.db
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
    try {
      const outcome = await transact({ scope, key, hash, now, replace: stored !== undefined }, prepared.value);
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
