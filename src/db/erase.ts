import { sql, type Kysely } from 'kysely';
import type { DialectName } from './dialect.ts';
import type { Schema } from './schema.ts';

type Erase = (db: Kysely<Schema>, tables: ReadonlyArray<keyof Schema>) => Promise<void>;

/**
 * After values were overwritten or deleted that must not stay readable (a secret in clear,
 * once sealed): the files of the database no longer hold them. Both rewrite what they clean
 * under a lock that holds every other writer off while they run, so they are for a start that
 * changed such values, on small tables.
 */
export const eraseDeletedValues: Record<DialectName, Erase> = {
  /**
   * SQLite keeps a deleted value in its page (a freed cell, a free page) and in the WAL's older
   * frames until they are written over. The WAL is copied into the file and emptied; VACUUM
   * writes the whole database anew from its live rows, through the WAL (in WAL mode); that WAL
   * is copied and emptied in turn.
   */
  sqlite: async (db) => {
    await emptyWal(db);
    await sql`vacuum`.execute(db);
    await emptyWal(db);
  },
  /**
   * PostgreSQL keeps the old version of an updated or deleted row (a dead tuple) until a vacuum,
   * and a plain VACUUM only marks its space free: the bytes can stay in the page (seen with
   * pageinspect after updating a row to a shorter value). VACUUM FULL writes each table anew,
   * outside a transaction (VACUUM refuses one). What it cannot remove: the versions that a
   * snapshot may still read, and PostgreSQL's own WAL, until it recycles its segments. So it
   * first waits, for a while, for what would keep them (outlastOlderSnapshots); one that
   * outlasts the wait (a pg_dump) keeps the old versions until it ends and a vacuum comes.
   */
  postgres: async (db, tables) => {
    await outlastOlderSnapshots(db);
    await sql`vacuum full ${sql.join(tables.map((table) => sql.table(table)))}`.execute(db);
  },
};

const OLDER_SNAPSHOTS_WAIT_MS = 10_000;
const OLDER_SNAPSHOTS_POLL_MS = 20;

/**
 * Until VACUUM FULL may drop every row version that transactions committed before this call
 * deleted, or the wait is over. It copies those a snapshot may still see: one that another
 * backend of this database holds from before, and also its own, whose horizon is the oldest
 * transaction still running in any database of the server (a migration or an ANALYZE next door
 * holds it back as surely as a reader here).
 */
async function outlastOlderSnapshots(db: Kysely<Schema>): Promise<void> {
  const { rows } = await sql<{ next: string }>`select pg_snapshot_xmax(pg_current_snapshot())::text as next`.execute(
    db,
  );
  const next = rows[0].next;
  const deadline = Date.now() + OLDER_SNAPSHOTS_WAIT_MS;
  while (Date.now() < deadline) {
    const { rows: held } = await sql<{ held: boolean }>`
      select pg_snapshot_xmin(pg_current_snapshot()) < ${next}::xid8
          or exists (select from pg_stat_activity
                      where datname = current_database() and pid <> pg_backend_pid()
                        and age(backend_xmin) > age(${next}::xid8::xid)) as held`.execute(db);
    if (!held[0].held) return;
    await new Promise((resolve) => setTimeout(resolve, OLDER_SNAPSHOTS_POLL_MS));
  }
}

/**
 * The settings row in which a migration names the tables whose old values the next start must
 * erase (a JSON list): a migration runs in a transaction, where neither VACUUM runs.
 */
export const ERASE_PENDING = 'erase_pending';

/** The tables migrations left to erase; none when they left nothing. */
export async function pendingErasure(db: Kysely<Schema>): Promise<Array<keyof Schema>> {
  const row = await db.selectFrom('settings').select('value').where('key', '=', ERASE_PENDING).executeTakeFirst();
  return row ? (JSON.parse(row.value) as Array<keyof Schema>) : [];
}

/** Once they are erased. */
export async function erasedPending(db: Kysely<Schema>): Promise<void> {
  await db.deleteFrom('settings').where('key', '=', ERASE_PENDING).execute();
}

/**
 * The database's own checkpointer thread (sqlite-checkpointer.ts) runs a PASSIVE checkpoint
 * twice a second, and SQLite runs one checkpoint at a time: a TRUNCATE that meets one answers
 * busy at once, whatever busy_timeout says. A passive round takes milliseconds, so waiting a
 * little and trying again is enough; a reader that outlasts every try is reported.
 */
const CHECKPOINT_TRIES = 40;
const CHECKPOINT_RETRY_MS = 50;

/** A checkpoint that waits for readers (up to busy_timeout) and leaves the WAL empty, or says it could not. */
async function emptyWal(db: Kysely<Schema>): Promise<void> {
  for (let attempt = 1; attempt <= CHECKPOINT_TRIES; attempt++) {
    const { rows } = await sql<{ busy: number }>`pragma wal_checkpoint(truncate)`.execute(db);
    if (!rows[0]?.busy) return;
    await new Promise((resolve) => setTimeout(resolve, CHECKPOINT_RETRY_MS));
  }
  throw new Error(
    'the SQLite WAL could not be emptied: another connection kept reading the database, ' +
      'and what was deleted may rest in the WAL until written over',
  );
}
