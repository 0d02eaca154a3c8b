import { sql, type Kysely } from 'kysely';
import type { ProcedureDatabase } from '../db/procedure.ts';
import type { Schema, VerifyRollupTable } from '../db/schema.ts';
import { BUCKET_MS } from '../messaging/rollup.ts';

type Db = Kysely<Schema>;
type Counts = Omit<VerifyRollupTable, 'account_id' | 'bucket' | 'country'>;

const NONE: Counts = { started: 0, approved: 0, failed: 0, expired: 0, blocked_country: 0, blocked_prefix: 0 };

/**
 * Rollup rows a statement: nine parameters each, well under SQLite's 32,766 and PostgreSQL's
 * 65,535, however many buckets a chunk spans (a backlog's 10,000 rows may fall in as many).
 */
const ROLLUP_ROWS_A_STATEMENT = 1_000;

/**
 * Verifications and blocked attempts older than RETENTION_DAYS, a chunk a transaction, counted
 * into verify_rollup in the transaction that deletes them (GET /verify/stats reads both). A
 * verification still pending by then ended long ago: it counts as expired.
 */
const purgeVerifications = foldedPurge('verifications', 'created_at', ['status'], (row) => ({
  ...NONE,
  started: 1,
  approved: row.status === 'approved' ? 1 : 0,
  failed: row.status === 'failed' ? 1 : 0,
  expired: row.status === 'expired' || row.status === 'pending' ? 1 : 0,
}));

const purgeBlocked = foldedPurge('verify_blocked', 'at', ['reason'], (row) => ({
  ...NONE,
  [row.reason === 'country' ? 'blocked_country' : 'blocked_prefix']: 1,
}));

/**
 * A purge of `table`'s rows whose `time` is before the cutoff, oldest first, each counted by
 * `counts` (of its `columns`) into the rollup as its delete returns it: two sweeps at once (a
 * lapsed lease's) count each row once, the second's delete finding it gone (PostgreSQL waits for
 * the first), where counting the chunk as read counted it twice.
 */
function foldedPurge<T extends 'verifications' | 'verify_blocked', C extends keyof Schema[T] & string>(
  table: T,
  time: 'created_at' | 'at',
  columns: C[],
  counts: (row: Record<C, string>) => Counts,
) {
  return ({ db }: ProcedureDatabase, before: number, limit: number): Promise<number> =>
    db.transaction().execute(async (trx) => {
      const { rows: chunk } = await sql<{ id: string | number }>`
        select id from ${sql.table(table)} where ${sql.ref(time)} < ${before}
         order by ${sql.ref(time)} limit ${limit}`.execute(trx);
      if (chunk.length === 0) return 0;
      const { rows } = await sql<{ id: string | number; account_id: string; country: string; at: number }>`
        delete from ${sql.table(table)} where id in (${sql.join(chunk.map((row) => row.id))})
        returning id, account_id, country, ${sql.ref(time)} as at, ${sql.join(columns.map((c) => sql.ref(c)))}`.execute(
        trx,
      );
      await fold(
        trx,
        rows.map((row) => ({
          accountId: row.account_id,
          at: Number(row.at),
          country: row.country,
          counts: counts(row as unknown as Record<C, string>),
        })),
      );
      return rows.length;
    });
}

/** Counts added to their rollup rows (account, quarter-hour bucket, country), in the caller's transaction. */
async function fold(
  trx: Db,
  entries: Array<{ accountId: string; at: number; country: string; counts: Counts }>,
): Promise<void> {
  const rows = new Map<string, VerifyRollupTable>();
  for (const { accountId, at, country, counts } of entries) {
    const bucket = Math.floor(at / BUCKET_MS);
    const key = `${accountId}\n${bucket}\n${country}`;
    const row = rows.get(key) ?? { account_id: accountId, bucket, country, ...NONE };
    for (const name of Object.keys(NONE) as Array<keyof Counts>) row[name] += counts[name];
    rows.set(key, row);
  }
  const folded = [...rows.values()];
  for (let at = 0; at < folded.length; at += ROLLUP_ROWS_A_STATEMENT) {
    await addToRollup(trx, folded.slice(at, at + ROLLUP_ROWS_A_STATEMENT));
  }
}

async function addToRollup(trx: Db, rows: VerifyRollupTable[]): Promise<void> {
  await trx
    .insertInto('verify_rollup')
    .values(rows)
    .onConflict((oc) =>
      oc
        .columns(['account_id', 'bucket', 'country'])
        .doUpdateSet((eb) =>
          Object.fromEntries(
            (Object.keys(NONE) as Array<keyof Counts>).map((name) => [
              name,
              eb(`verify_rollup.${name}`, '+', eb.ref(`excluded.${name}`)),
            ]),
          ),
        ),
    )
    .execute();
}

/** Verify's stores the retention sweep empties (messaging/retention.ts), by name. */
export const VERIFY_PURGES = { verifications: purgeVerifications, verifyBlocked: purgeBlocked };
