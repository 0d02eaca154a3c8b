/**
 * The retention purge on SQLite and PostgreSQL: sends completed long ago, each with its
 * recipients' own tags and its sandbox records, and one large list send (recipients without
 * tags of their own), purged chunk by chunk as the sweep does. What matters is the longest
 * chunk, since a chunk holds SQLite's one writer (and PostgreSQL's row locks) while it runs;
 * then the whole purge's rate, and a sweep that finds nothing left.
 *
 *   node bench/retention.ts
 *   BENCH_SENDS=10000 node bench/retention.ts
 */
import { sql } from 'kysely';
import { createAccount } from '../src/accounts/service.ts';
import { ManualClock } from '../src/clock.ts';
import { migrateToLatest, openDatabase, type Database } from '../src/db/database.ts';
import { CHUNK_LIMITS, purgeSendsChunk, sweep } from '../src/messaging/retention.ts';
import { PROCEDURE_MODULES } from '../src/server/procedures.ts';
import { onEachDatabase } from './herald-process.ts';
import { series } from './seed.ts';
import { SMS_PURGES } from '../src/sms/receipts.ts';

const SENDS = Number(process.env.BENCH_SENDS ?? 40_000);
const RECIPIENTS = 10;
const LIST_RECIPIENTS = 200_000;
const DAY = 24 * 60 * 60_000;

async function fill(database: Database, accountId: string, completedAt: number): Promise<number> {
  const { db } = database;
  const content = JSON.stringify({
    kind: 'batch',
    senderName: 'HERALD',
    body: 'Your code is [code]',
    tags: {},
    landingPageId: null,
    shortener: null,
  });
  await sql`insert into sends (id, account_id, channel, status, content, list_ids, created_at, completed_at)
            select 'send-' || g, ${accountId}, 'sms', 'Completed', ${content}, '[]',
                   cast(${completedAt} as bigint), cast(${completedAt} as bigint) + g
              from ${series(database, SENDS + 1)}`.execute(db);
  await sql`insert into send_recipients (send_id, address, tags, status, updated_at)
            select 'send-' || (1 + g % ${sql.lit(SENDS)}), '9198' || g, '{"[code]":"482913"}', 'Delivered',
                   cast(${completedAt} as bigint)
              from ${series(database, SENDS * RECIPIENTS)}`.execute(db);
  await sql`insert into send_recipients (send_id, address, status, updated_at)
            select 'send-' || ${sql.lit(SENDS + 1)}, '4479' || g, 'Delivered', cast(${completedAt} as bigint)
              from ${series(database, LIST_RECIPIENTS)}`.execute(db);
  await sql`insert into sandbox_sms (account_id, send_id, message_id, recipient, sender, part, parts, encoding, text,
                                     created_at)
            select ${accountId}, send_id, 'message-' || id, address, 'HERALD', 1, 1, 'GSM-7', 'Your code is 482913',
                   cast(${completedAt} as bigint)
              from send_recipients`.execute(db);
  return SENDS * RECIPIENTS * 2 + LIST_RECIPIENTS;
}

async function run(url: string): Promise<void> {
  const database = openDatabase(url, { procedures: PROCEDURE_MODULES });
  try {
    await database.ready();
    await migrateToLatest(database);
    const clock = new ManualClock(Date.now());
    const account = await createAccount(database.db, clock, {
      userName: `bench-${process.pid}@example.com`,
      password: 'correct horse battery staple',
    });
    const rows = await fill(database, account.id, clock.now() - 40 * DAY);
    // What the fill left to settle (SQLite's WAL to copy back, PostgreSQL's statistics) is not the purge's cost.
    await (database.dialect === 'postgres' ? sql`vacuum analyze` : sql`pragma wal_checkpoint(truncate)`).execute(
      database.db,
    );

    const now = clock.now();
    const chunkMs: number[] = [];
    let purged = 0;
    const started = performance.now();
    for (let more = true; more; ) {
      const begun = performance.now();
      const chunk = await database.call(purgeSendsChunk, { before: now - 30 * DAY, now, limits: CHUNK_LIMITS });
      chunkMs.push(performance.now() - begun);
      purged += chunk.rows;
      more = chunk.more;
    }
    const totalMs = performance.now() - started;
    if (purged !== rows) throw new Error(`purged ${purged} rows of ${rows}`);
    const idle = performance.now();
    await sweep(database, now, 30, { channelPurges: SMS_PURGES });
    const idleMs = performance.now() - idle;

    chunkMs.sort((a, b) => a - b);
    const ms = (value: number) => value.toFixed(1);
    console.log(
      `${database.dialect}: ${SENDS + 1} sends, ${rows} rows (tags and sandbox records) ` +
        `in ${chunkMs.length} transactions: ` +
        `${Math.round(rows / (totalMs / 1000))} rows/s; a transaction ` +
        `took ${ms(chunkMs[Math.floor(chunkMs.length / 2)])} ms at the median, ` +
        `${ms(chunkMs.at(-1)!)} ms at the longest; a sweep with nothing left: ${ms(idleMs)} ms`,
    );
  } finally {
    await database.close();
  }
}

await onEachDatabase('retention', run);
