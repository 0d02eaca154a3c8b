import { PostgresAdapter, sql, type Kysely } from 'kysely';

/**
 * What `GET /stats` and `GET /usage` read (src/messaging/usage.ts): per account, channel and
 * quarter-hour (`bucket`, epoch ms / 900,000), how many messages reached each status word and
 * their parts by encoding (SMS; '' for none). Kept by every transaction that changes statuses
 * (src/messaging/rollup.ts), so a month of an account's statistics is a few thousand rows
 * whatever millions of messages they count. Also the listing of an account's sends, newest first.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  let table = db.schema
    .createTable('usage_rollup')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('channel', 'text', (c) => c.notNull().check(sql`channel in ('sms', 'email')`))
    .addColumn('bucket', 'bigint', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('encoding', 'text', (c) => c.notNull())
    .addColumn('messages', 'bigint', (c) => c.notNull())
    .addColumn('parts', 'bigint', (c) => c.notNull())
    // The key is the reads' range: one account's channel over a span of buckets.
    .addPrimaryKeyConstraint('usage_rollup_pkey', ['account_id', 'channel', 'bucket', 'status', 'encoding']);
  // On SQLite the table is its key's b-tree: a range read touches no second structure.
  if (!postgres) table = table.modifyEnd(sql`without rowid`);
  await table.execute();
  await backfillUsageRollup(db);
  await db.schema
    .createIndex('sends_listing')
    .on('sends')
    .columns(['account_id', 'channel', 'created_at', 'id'])
    .execute();
}

/**
 * The rollup counted from what is stored: every status of every recipient's history in the
 * quarter-hour it was reached, and a cancelled recipient (which has no history) when it was
 * cancelled. What the migration fills the table with from the messages sent before it; the
 * statistics benchmark builds its rollup so too.
 */
export async function backfillUsageRollup<DB>(db: Kysely<DB>): Promise<void> {
  await sql`
    insert into usage_rollup (account_id, channel, bucket, status, encoding, messages, parts)
    select account_id, channel, bucket, status, encoding, count(*), sum(parts)
      from (select s.account_id, s.channel, h.at / 900000 as bucket, h.status, coalesce(r.encoding, '') as encoding,
                   coalesce(r.parts, 0) as parts
              from recipient_history h
              join send_recipients r on r.id = h.recipient_id
              join sends s on s.id = r.send_id
            union all
            select s.account_id, s.channel, r.updated_at / 900000, r.status, '', 0
              from send_recipients r
              join sends s on s.id = r.send_id
             where r.status = 'Cancelled') events
     group by account_id, channel, bucket, status, encoding`.execute(db);
}
