/**
 * GET /stats over 10 million stored message statuses, on SQLite and PostgreSQL: sends of a few
 * accounts spread over 35 days, their recipients and each one's status history written by
 * set-based inserts, the rollup counted from them as migration 0023 counts stored messages,
 * then 30 days of one account's statistics asked for through the app (`app.inject`: the
 * route, its validation, its SQL and its serialisation, without a socket), by day and by hour.
 *
 *   npm run bench:stats
 *   BENCH_MESSAGES=1000000 node bench/stats.ts
 */
import { sql } from 'kysely';
import { createAccount } from '../src/accounts/service.ts';
import { buildApp } from '../src/server/app.ts';
import { ManualClock } from '../src/clock.ts';
import { loadConfig } from '../src/config.ts';
import type { AppContext } from '../src/context.ts';
import { migrateToLatest, openDatabase, type Database } from '../src/db/database.ts';
import { backfillUsageRollup } from '../src/db/migrations/0023_usage_rollup.ts';
import { createMetricsRegistry } from '../src/http/metrics.ts';
import { loadEncryptionKey } from '../src/messaging/encryption-key.ts';
import { PROCEDURE_MODULES } from '../src/server/procedures.ts';
import { MemoryCounterStore } from '../src/ratelimit/counters.ts';
import { prepareStoredSecrets } from '../src/server/stored-secrets.ts';
import { BENCH_ENCRYPTION_KEY, onEachDatabase } from './herald-process.ts';
import { series } from './seed.ts';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 10_000_000);
const PER_SEND = 1000;
const ACCOUNTS = 4;
const DAYS = 35;
const DAY = 86_400_000;
const RUNS = 20;
const PASSWORD = 'correct horse battery staple';

/**
 * MESSAGES statuses: sends of PER_SEND recipients, SMS and email by turns for each account,
 * evenly over DAYS before `end`; each recipient with two statuses in its history a few
 * seconds after its send: of ten, one NotSent or Dropped (twice: the bench keeps two a
 * recipient), one Submitted or Processed then Failed or Bounce, the rest Submitted or
 * Processed then Delivered (for email, one of those Open instead).
 */
async function fill(database: Database, accountIds: string[], end: number): Promise<void> {
  const { db } = database;
  const recipients = MESSAGES / 2;
  const sends = recipients / PER_SEND;
  const start = end - DAYS * DAY;
  const step = Math.floor((DAYS * DAY) / sends);
  const accounts = accountIds.map((id, i) => `when ${i} then '${id}'`).join(' ');
  const content = JSON.stringify({
    kind: 'batch',
    senderName: 'HERALD',
    body: 'Hello',
    tags: {},
    landingPageId: null,
    shortener: null,
  });
  await sql`insert into sends (id, account_id, channel, status, content, list_ids, created_at, completed_at)
            select 'send-' || g, case g % ${sql.lit(ACCOUNTS)} ${sql.raw(accounts)} end,
                   case g / ${sql.lit(ACCOUNTS)} % 2 when 0 then 'sms' else 'email' end, 'Completed', ${content}, '[]',
                   ${sql.lit(start)} + cast(g as bigint) * ${sql.lit(step)},
                   ${sql.lit(start)} + cast(g as bigint) * ${sql.lit(step)} + 60000
              from ${series(database, sends)}`.execute(db);
  // Recipient g belongs to send 1 + (g - 1) / PER_SEND; its id is g.
  const send = sql`(1 + (g - 1) / ${sql.lit(PER_SEND)})`;
  const sms = sql`${send} / ${sql.lit(ACCOUNTS)} % 2 = 0`;
  await sql`insert into send_recipients (id, send_id, address, status, parts, encoding, updated_at)
            select g, 'send-' || ${send}, '9198' || g,
                   case when g % 10 = 0 then case when ${sms} then 'Failed' else 'Bounce' end
                        when g % 10 = 1 then case when ${sms} then 'NotSent' else 'Dropped' end
                        else 'Delivered' end,
                   case when ${sms} then 1 + g % 3 / 2 end, case when ${sms} then 'GSM-7' end,
                   ${sql.lit(start)} + cast(${send} as bigint) * ${sql.lit(step)} + g % ${sql.lit(PER_SEND)} * 10
              from ${series(database, recipients)}`.execute(db);
  await sql`insert into recipient_history (recipient_id, status, at)
            select id,
                   case when status in ('NotSent', 'Dropped') then status
                        when encoding is null then 'Processed'
                        else 'Submitted' end,
                   updated_at - 5000
              from send_recipients
            union all
            select id, case when status = 'Delivered' and id % 10 = 2 and encoding is null then 'Open' else status end,
                   updated_at
              from send_recipients`.execute(db);
  await backfillUsageRollup(db);
}

async function run(url: string): Promise<void> {
  const database = openDatabase(url, { procedures: PROCEDURE_MODULES });
  try {
    await database.ready();
    await migrateToLatest(database);
    const clock = new ManualClock(Date.UTC(2026, 2, 31, 12, 0, 0));
    const accounts = [];
    for (let i = 0; i < ACCOUNTS; i++)
      accounts.push(
        await createAccount(database.db, clock, {
          userName: `bench-${i}-${process.pid}@example.com`,
          password: PASSWORD,
        }),
      );
    const filling = performance.now();
    await fill(
      database,
      accounts.map((a) => a.id),
      clock.now(),
    );
    await (database.dialect === 'postgres' ? sql`vacuum analyze` : sql`pragma wal_checkpoint(truncate)`).execute(
      database.db,
    );
    const fillS = (performance.now() - filling) / 1000;
    const { rollupRows } = (
      await sql<{ rollupRows: number }>`select count(*) as "rollupRows" from usage_rollup`.execute(database.db)
    ).rows[0];

    const config = loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'silent', ENCRYPTION_KEY: BENCH_ENCRYPTION_KEY });
    const encryptionKey = loadEncryptionKey(url, config.encryptionKey);
    const ctx: AppContext = {
      config,
      database,
      db: database.db,
      clock,
      counters: new MemoryCounterStore(),
      jwtKey: await prepareStoredSecrets(database, encryptionKey, config.jwtSecret),
      encryptionKey,
      metrics: createMetricsRegistry(),
    };
    const app = await buildApp(ctx);
    await app.ready();
    try {
      const [account] = accounts;
      const token = await app.inject({
        method: 'POST',
        url: '/token',
        payload: {
          userName: account.user_name,
          password: PASSWORD,
          privateToken: account.privateToken,
          validity: 'Default',
        },
      });
      const authorization = `Bearer ${token.json().access_token}`;
      const timed = async (query: string) => {
        const ms: number[] = [];
        let points = 0;
        for (let i = 0; i < RUNS + 2; i++) {
          const begun = performance.now();
          const response = await app.inject({ method: 'GET', url: `/stats?${query}`, headers: { authorization } });
          const took = performance.now() - begun;
          if (response.statusCode !== 200)
            throw new Error(`GET /stats answered ${response.statusCode}: ${response.body}`);
          points = response.json().points.reduce((sum: number, p: { sent: number }) => sum + p.sent, 0);
          if (i >= 2) ms.push(took);
        }
        ms.sort((a, b) => a - b);
        return (
          `${ms[Math.floor(ms.length / 2)].toFixed(1)} ms median, ${ms.at(-1)!.toFixed(1)} ms slowest ` +
          `(${points} sent)`
        );
      };
      const span = 'from=2026-03-01&to=2026-03-30';
      console.log(
        `${database.dialect}: ${MESSAGES} messages of ${ACCOUNTS} accounts over ${DAYS} days generated and ` +
          `rolled up in ${fillS.toFixed(0)} s (${rollupRows} rollup rows); ` +
          `GET /stats for 30 days, one account: SMS by day ${await timed(`${span}&channel=sms`)}; email by ` +
          `day ${await timed(`${span}&channel=email`)}; ` +
          `email by hour ${await timed(`${span}&channel=email&interval=hour`)}`,
      );
    } finally {
      await app.close();
    }
  } finally {
    await database.close();
  }
}

await onEachDatabase('stats', run);
