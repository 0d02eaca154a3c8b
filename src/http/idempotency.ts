import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sql, type SqlBool, type Transaction } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import type { DialectName } from '../db/dialect.ts';
import { chunkOf } from '../db/chunks.ts';
import { procedure, type Procedure, type ProcedureDatabase } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { type AppError, appErrorData, type AppErrorData, appErrorOf, badRequest, unprocessable } from '../errors.ts';
import { open, seal, SEALED_PREFIX, type Keyring } from '../sealed.ts';

/** Keys are honoured for 24 hours (as Stripe and Brevo do); after that a key may be reused. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60_000;

export interface Outcome<T> {
  statusCode: number;
  body: T;
  /**
   * What the key's record keeps, and a replay answers, when the body shows something once and
   * must not be kept even sealed (a new API key): the body without it. Unset: the body.
   */
  recorded?: T;
}

/**
 * Requests are hashed under a key derived from ENCRYPTION_KEY (sealed.ts's Keyring). Keyed: a
 * plain hash of a body that holds a passcode (`/sms/single`) or a password (`/admin/accounts`)
 * gives the secret back to anyone who reads the table and tries every six digits, or a list
 * of common passwords, with the rest of the body guessed or read beside it.
 */
const REQUEST_HASH = 'herald idempotency request hash';
const RESPONSE = 'herald idempotency response';

/**
 * The request's hash under the current key, and whether a recorded hash is the request's under any
 * key of the ring (a record made before ENCRYPTION_KEY was replaced).
 */
function requestHash(request: FastifyRequest, keys: Keyring): { hash: string; madeBy(recorded: string): boolean } {
  const text = [
    `${request.method} ${request.routeOptions.url}`,
    JSON.stringify(request.params ?? {}),
    JSON.stringify(request.body ?? null),
  ].join('\n');
  const [current, ...previous] = keys.derive(REQUEST_HASH).all;
  const under = (key: KeyObject) => createHmac('sha256', key).update(text).digest('base64url');
  const hash = under(current);
  return { hash, madeBy: (recorded) => recorded === hash || previous.some((key) => under(key) === recorded) };
}

/** The key a request claims, in the transaction of its work: plain data, as a procedure's arguments are. */
export interface KeyClaim {
  scope: string;
  key: string;
  hash: string;
  now: number;
  /** An expired record of the key is there, to be replaced. */
  replace: boolean;
  /**
   * The key the response is sealed under (sealed.ts), derived from ENCRYPTION_KEY: a response
   * can hold a secret (a new account's private token), and a record keeps it for a day. Bytes,
   * so the claim crosses to SQLite's thread as plain data.
   */
  responseKey: Uint8Array;
}

const responsePlace = (scope: string, key: string) => `idempotency_keys:${scope}:${key}`;

/**
 * The idempotency step of a POST's transaction: claims the key, runs the work, records its
 * response. The key is claimed before the work, so a concurrent request with the same key
 * blocks on this row (PostgreSQL) or on the write lock (SQLite) and then conflicts on the
 * key, rather than on whatever unique constraint the work itself touches.
 */
export async function withIdempotencyKey<T>(
  trx: Transaction<Schema>,
  claim: KeyClaim | undefined,
  work: () => Promise<Outcome<T>>,
): Promise<Outcome<T>> {
  if (!claim) return work();
  const { scope, key } = claim;
  // Only while it is still expired: a request that read the same expired record and committed
  // first has replaced it, and this one must conflict on the key and replay that response.
  if (claim.replace)
    await trx
      .deleteFrom('idempotency_keys')
      .where('scope', '=', scope)
      .where('key', '=', key)
      .where('created_at', '<=', claim.now - IDEMPOTENCY_TTL_MS)
      .execute();
  await trx
    .insertInto('idempotency_keys')
    .values({ scope, key, request_hash: claim.hash, status_code: 0, response_body: '', created_at: claim.now })
    .execute();
  const outcome = await work();
  const recorded = outcome.recorded ?? outcome.body;
  await trx
    .updateTable('idempotency_keys')
    .set({
      status_code: outcome.statusCode,
      response_body: seal(createSecretKey(claim.responseKey), JSON.stringify(recorded), responsePlace(scope, key)),
    })
    .where('scope', '=', scope)
    .where('key', '=', key)
    .execute();
  return outcome;
}

/** What a POST's procedure is given: its own arguments, and the key to claim if the request has one. */
export interface Keyed<A> {
  claim: KeyClaim | undefined;
  args: A;
}

/**
 * A POST's writes: a procedure whose transaction holds them and the record of its key
 * (postProcedure). `group`: the same writes for a group of requests without a key.
 */
export type PostProcedure<A, T> = Procedure<Keyed<A>, Outcome<T>> & { group?: PostGroupProcedure<A, T> };

/**
 * A POST's writes for a group of requests, none with a key to claim: each one's outcome, in
 * order, or its Refusal.
 */
export type PostGroupProcedure<A, T> = Procedure<A[], Array<Outcome<T> | Refusal>>;

/**
 * A group member refused by its own checks inside the group's transaction (a limit counted
 * there), having written nothing: its caller gets the error, and the others in the group
 * commit. Plain data, so it crosses SQLite's thread as a result.
 */
export interface Refusal {
  refused: AppErrorData;
}

export const refusalOf = (error: AppError): Refusal => ({ refused: appErrorData(error) });

/** The outcome of one request's work that a group may refuse: the outcome, or the refusal thrown. */
export function outcomeOf<T>(answer: Outcome<T> | Refusal): Outcome<T> {
  if ('refused' in answer) throw appErrorOf(answer.refused);
  return answer;
}

/**
 * Declares a POST's writes: `work` runs in one transaction, with the idempotency step
 * around it, where the data is (db/procedure.ts). So on SQLite the whole transaction runs
 * on the database's thread in one go, and holds the only writing connection for its SQL
 * alone: anything else a request needs (checks, reads, a password hash) is done before,
 * and reaches the work through its arguments.
 *
 * `group`: requests without a key go together with whoever else posts meanwhile, in that
 * procedure's transaction (postGroupProcedure), rather than one transaction each.
 */
export function postProcedure<A, T>(
  module: string,
  name: string,
  work: (trx: ProcedureDatabase, args: A) => Promise<Outcome<T>>,
  options: { group?: PostGroupProcedure<A, T> } = {},
): PostProcedure<A, T> {
  const declared = procedure(module, name, ({ db, dialect }, { claim, args }: Keyed<A>) =>
    db.transaction().execute((trx) => withIdempotencyKey(trx, claim, () => work({ db: trx, dialect }, args))),
  );
  return Object.assign(declared, { group: options.group });
}

/**
 * Declares a POST's writes for a group of requests without a key (db/gathering.ts): `work`
 * writes them all in one transaction and answers each one's outcome, in order, or the
 * Refusal of one its checks in the transaction refused.
 * `oneStatement`: on that dialect `work` writes in a single statement, atomic by itself, so
 * the group skips BEGIN and COMMIT: two round trips of three; unless a request of the group
 * is one that `needsTransaction`.
 */
export function postGroupProcedure<A, R extends Outcome<unknown> | Refusal>(
  module: string,
  name: string,
  work: (trx: ProcedureDatabase, group: A[]) => Promise<R[]>,
  options: { oneStatement?: DialectName; needsTransaction?: (request: A) => boolean } = {},
): Procedure<A[], R[]> {
  return procedure(module, name, ({ db, dialect }, group: A[]) => {
    const needsTransaction = options.needsTransaction ?? (() => false);
    if (options.oneStatement === dialect && !group.some(needsTransaction)) return work({ db, dialect }, group);
    return db.transaction().execute((trx) => work({ db: trx, dialect }, group));
  });
}

/**
 * Runs a POST's procedure and answers with its outcome; when the request carries an
 * `Idempotency-Key`, the response is stored in the procedure's own transaction. So the work
 * and the record of it commit together: a retry after a crash either finds both or
 * neither, and a retry that finds the record gets the first response again with nothing
 * redone (and `prepare` not run). Same key with another body → 422. Two concurrent requests
 * with one key: the second's claim conflicts, its transaction (and its work) rolls back, and
 * it replays the first. `scope` keeps one account's keys apart from another's.
 *
 * `prepare` builds the procedure's arguments, outside any transaction: the checks and reads
 * the work needs, and anything slow that is not SQL.
 */
export async function idempotent<A, T>(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: { database: Database; clock: Clock; encryptionKey: Keyring },
  scope: string,
  work: PostProcedure<A, T>,
  prepare: () => A | Promise<A>,
): Promise<T> {
  const { database } = deps;
  const answer = (outcome: Outcome<T>): T => {
    reply.code(outcome.statusCode);
    return outcome.body;
  };
  const header = request.headers['idempotency-key'];
  if (header === undefined) {
    const args = await prepare();
    return answer(
      work.group
        ? outcomeOf(await database.gather(work.group, args))
        : await database.call(work, { claim: undefined, args }),
    );
  }
  const key = Array.isArray(header) ? header[0] : header;
  if (key.length < 1 || key.length > 255) {
    throw badRequest('The Idempotency-Key header must be 1 to 255 characters.', [
      { field: 'Idempotency-Key', message: 'must be 1 to 255 characters' },
    ]);
  }
  const { hash, madeBy } = requestHash(request, deps.encryptionKey);

  let args: { value: A } | undefined;
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
      if (!madeBy(live.request_hash)) {
        throw unprocessable('This Idempotency-Key was already used with a different request.', [
          { field: 'Idempotency-Key', message: 'was used with another body or path' },
        ]);
      }
      reply.header('idempotent-replayed', 'true');
      return answer({
        statusCode: live.status_code,
        body: JSON.parse(openResponse(live.response_body, deps.encryptionKey.derive(RESPONSE), scope, key)) as T,
      });
    }
    args ??= { value: await prepare() };
    try {
      const responseKey = new Uint8Array(deps.encryptionKey.derive(RESPONSE).current.export());
      const claim = { scope, key, hash, now, replace: stored !== undefined, responseKey };
      return answer(await database.call(work, { claim, args: args.value }));
    } catch (error) {
      // Another request with this key committed first: go round once more to replay its
      // response. A second conflict is the work's own, not the key's.
      if (!isUniqueViolation(error) || attempt > 1) throw error;
    }
  }
}

/**
 * A recorded response in clear; one recorded before responses were sealed (a day's worth at the
 * upgrade) is JSON as it is.
 */
function openResponse(recorded: string, keys: Keyring, scope: string, key: string): string {
  return recorded.startsWith(SEALED_PREFIX) ? open(keys, recorded, responsePlace(scope, key)) : recorded;
}

/** Deletes up to `limit` records of keys no longer honoured (by the retention sweep); answers how many it deleted. */
export async function purgeExpiredIdempotencyKeys(
  { db, dialect }: ProcedureDatabase,
  now: number,
  limit: number,
): Promise<number> {
  const expired = sql<SqlBool>`created_at <= ${now - IDEMPOTENCY_TTL_MS}`;
  const result = await db
    .deleteFrom('idempotency_keys')
    .where(expired)
    .where(chunkOf(dialect, 'idempotency_keys', expired, limit))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
