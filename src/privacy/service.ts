import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { AppContext } from '../context.ts';
import type { Schema } from '../db/schema.ts';
import { notFound } from '../errors.ts';
import { erasureKey } from '../messaging/erased-identifiers.ts';
import { pauseForTest } from '../messaging/test-pause.ts';
import type { Job, JobHandler } from '../queue/worker.ts';
import { open, seal } from '../sealed.ts';
import type { AuditBy } from '../audit/entries.ts';
import {
  beginErasure,
  completeErasure,
  ERASURE_STEPS,
  eraseChunk,
  type ErasureJob,
  type StepDone,
} from './erasures.ts';
import { personOf, type Identifier, type Person } from './person.ts';

type Ctx = Pick<AppContext, 'database' | 'db' | 'clock' | 'encryptionKey'>;

/** Where the person's identifiers are sealed while their erasure runs (the AAD of the seal). */
const place = (erasureId: string) => `erasures.${erasureId}`;

/**
 * POST /privacy/erasures's arguments (beginErasure): the person suppressed and their unsent
 * messages ended at once, the rest by a job. `by`: who asked, as the erasure's record and its
 * audit entry keep it.
 */
export async function erasureRequest(ctx: Ctx, accountId: string, given: Identifier, by: AuditBy) {
  const person = await personOf(ctx.db, accountId, given);
  const erasureId = randomUUID();
  return {
    ...person,
    accountId,
    erasureId,
    erasureKey: await erasureKey(ctx.db, ctx.encryptionKey),
    now: by.at,
    by,
    sealedIdentifiers: seal(ctx.encryptionKey.current, JSON.stringify(person), place(erasureId)),
  };
}

/** An erasure begun, without an Idempotency-Key (the route's keyed one goes through `idempotent`). */
export async function requestErasure(
  ctx: Ctx,
  accountId: string,
  given: Identifier,
  by: AuditBy,
): Promise<{ erasureId: string }> {
  const args = await erasureRequest(ctx, accountId, given, by);
  return (await ctx.database.call(beginErasure, { claim: undefined, args })).body;
}

/** GET /privacy/erasures/{erasureId}: 404 for another account's. */
export async function readErasure(db: Kysely<Schema>, accountId: string, erasureId: string) {
  const row = await db
    .selectFrom('erasures')
    .select(['id', 'status', 'contacts', 'messages', 'created_at', 'completed_at'])
    .where('account_id', '=', accountId)
    .where('id', '=', erasureId)
    .executeTakeFirst();
  if (!row) throw notFound('The erasure');
  return {
    erasureId: row.id,
    status: row.status,
    erased: { contacts: Number(row.contacts), messages: Number(row.messages) },
    createdAt: new Date(Number(row.created_at)).toISOString(),
    completedAt: row.completed_at === null ? null : new Date(Number(row.completed_at)).toISOString(),
  };
}

/**
 * The `privacy.erasure` job: each step of the inventory a chunk at a time until it finds
 * nothing left, then the erasure Completed and its sealed identifiers gone. Run again after a
 * crash, it passes over what is done.
 */
export function erasureHandler(ctx: Ctx): JobHandler {
  return {
    async handle(job: Job) {
      const { erasureId } = job.payload as ErasureJob;
      const row = await ctx.db
        .selectFrom('erasures')
        .select(['account_id', 'sealed_identifiers'])
        .where('id', '=', erasureId)
        .executeTakeFirst();
      if (!row || row.sealed_identifiers === null) return;
      const person = JSON.parse(open(ctx.encryptionKey, row.sealed_identifiers, place(erasureId))) as Person;
      const args = {
        ...person,
        accountId: row.account_id,
        erasureId,
        erasureKey: await erasureKey(ctx.db, ctx.encryptionKey),
      };
      for (const step of ERASURE_STEPS) {
        for (let after: string | number | null = null; ; ) {
          const done: StepDone = await ctx.database.call(eraseChunk, { ...args, step, after, now: ctx.clock.now() });
          if (done.rows === 0) break;
          after = done.next ?? null;
          await pauseForTest(`privacy.erase.${step}`);
        }
      }
      await ctx.database.call(completeErasure, { erasureId, now: ctx.clock.now() });
    },
    async onDead(trx, job) {
      const { erasureId } = job.payload as ErasureJob;
      await trx.updateTable('erasures').set({ status: 'Failed' }).where('id', '=', erasureId).execute();
    },
  };
}
