/**
 * Erasure (docs/privacy.md) on SQLite and PostgreSQL: one person among 1,000,000 and 10,000,000
 * SMS recipient rows, seeded by SQL with a history row and a part each, a webhook delivery per
 * hundred messages, and the person's own 40 messages, sandbox copies and replies. Prints the
 * request's transaction and the job's time. Then the consent check of an expansion over a list
 * of 100,000 contacts, with no erased suppressions and with 10,000 of them.
 *
 *   npm run bench:erasure
 *   BENCH_RECIPIENTS=1000000 BENCH_SKIP_CONSENT=1 node bench/erasure.ts
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { createAccount } from '../src/accounts/service.ts';
import { ManualClock } from '../src/clock.ts';
import { migrateToLatest, openDatabase, type Database } from '../src/db/database.ts';
import { erasedAddress, erasureKey } from '../src/messaging/erased-identifiers.ts';
import { expandRecipients } from '../src/messaging/recipients.ts';
import { requestErasure, erasureHandler } from '../src/privacy/service.ts';
import type { Job, JobRun } from '../src/queue/worker.ts';
import { Keyring, keyFromHex } from '../src/sealed.ts';
import { PROCEDURE_MODULES } from '../src/server/procedures.ts';
import { BENCH_ENCRYPTION_KEY, machine, onEachDatabase } from './herald-process.ts';
import { mobileContact, seedList, series } from './seed.ts';

const SIZES = (process.env.BENCH_RECIPIENTS ?? '1000000,10000000').split(',').map(Number);
const PER_SEND = 100;
const PERSON = '447000000001';
const PERSONS_MESSAGES = 40;
const LIST = 100_000;
const ERASED = 10_000;

async function seedHistory(database: Database, accountId: string, recipients: number): Promise<void> {
  const { db } = database;
  const sends = recipients / PER_SEND;
  const content = JSON.stringify({ kind: 'batch', senderName: 'HERALD', body: 'Hello', tags: {} });
  await sql`insert into sends (id, account_id, channel, status, content, list_ids, created_at, completed_at)
            select 'send-' || g, ${accountId}, 'sms', 'Completed', ${content}, '[]', g, g
              from ${series(database, sends)}`.execute(db);
  await sql`insert into send_recipients (send_id, address, status, message_id, parts, encoding, updated_at)
            select 'send-' || (1 + g % ${sql.lit(sends)}), '4479' || g, 'Delivered', 'm-' || g, 1, 'GSM-7', g
              from ${series(database, recipients)}`.execute(db);
  await sql`insert into recipient_history (recipient_id, status, at)
            select id, 'Delivered', updated_at from send_recipients`.execute(db);
  await sql`insert into sms_parts (recipient_id, part, operator_message_id, status, smsc)
            select id, 1, 'op-' || id, 'Delivered', 'default' from send_recipients`.execute(db);
  const event = (n: string) =>
    `{"queueId":"send-1","messageId":"m-${n}","recipient":"4479${n}","status":"Delivered","errorCode":null}`;
  const payload = `{"type":"sms.status","data":[${Array.from({ length: 8 }, (_, i) => event(String(i))).join(',')}]}`;
  await sql`insert into webhook_deliveries (id, account_id, type, url, payload, status, created_at)
            select 'delivery-' || g, ${accountId}, 'sms.status', 'https://hooks.example.com/h', ${payload},
                   'delivered', g
              from ${series(database, sends)}`.execute(db);
  // The person: a contact, 40 messages in 40 sends, their sandbox copies and replies.
  await db
    .insertInto('contacts')
    .values({ id: 1, account_id: accountId, ...mobileContact(PERSON), created_at: 0, updated_at: 0 })
    .execute();
  for (let n = 1; n <= PERSONS_MESSAGES; n++) {
    const sendId = `send-${n * Math.floor(sends / PERSONS_MESSAGES)}`;
    const [row] = await db
      .insertInto('send_recipients')
      .values({
        send_id: sendId,
        address: PERSON,
        contact_id: 1,
        tags: null,
        status: 'Delivered',
        reason: null,
        message_id: randomUUID(),
        parts: 1,
        encoding: 'GSM-7',
        error: null,
        updated_at: n,
      })
      .returning('id')
      .execute();
    await db.insertInto('recipient_history').values({ recipient_id: row.id, status: 'Delivered', at: n }).execute();
    await db
      .insertInto('sandbox_sms')
      .values({
        account_id: accountId,
        send_id: sendId,
        message_id: `person-${n}`,
        recipient: PERSON,
        sender: 'HERALD',
        part: 1,
        parts: 1,
        encoding: 'GSM-7',
        text: 'Hello',
        created_at: n,
      })
      .execute();
  }
  for (let n = 1; n <= 5; n++) {
    await db
      .insertInto('sms_inbound')
      .values({
        account_id: accountId,
        sender: PERSON,
        destination: 'HERALD',
        text: 'Thanks',
        contact_id: 1,
        received_at: n,
      })
      .execute();
  }
}

async function settle(database: Database): Promise<void> {
  await (database.dialect === 'postgres' ? sql`vacuum analyze` : sql`pragma wal_checkpoint(truncate)`).execute(
    database.db,
  );
}

async function eraseOne(url: string, recipients: number, keyring: Keyring): Promise<void> {
  const database = openDatabase(url, { procedures: PROCEDURE_MODULES });
  try {
    await database.ready();
    await migrateToLatest(database);
    const clock = new ManualClock(Date.now());
    const account = await createAccount(database.db, clock, {
      userName: `bench-${process.pid}@example.com`,
      password: 'correct horse battery staple',
    });
    const seeding = performance.now();
    await seedHistory(database, account.id, recipients);
    await settle(database);
    const seeded = (performance.now() - seeding) / 1000;

    const ctx = { database, db: database.db, clock, encryptionKey: keyring };
    const by = { actor: 'token' as const, ip: '127.0.0.1', at: clock.now() };
    const asked = performance.now();
    const { erasureId } = await requestErasure(ctx, account.id, { mobile: PERSON }, by);
    const requestMs = performance.now() - asked;
    const job = { payload: { erasureId } } as unknown as Job;
    const ran = performance.now();
    await erasureHandler(ctx).handle(job, {} as JobRun);
    const jobMs = performance.now() - ran;
    const done = await database.db
      .selectFrom('erasures')
      .select(['status', 'contacts', 'messages'])
      .where('id', '=', erasureId)
      .executeTakeFirstOrThrow();
    if (done.status !== 'Completed' || Number(done.messages) !== PERSONS_MESSAGES) {
      throw new Error(`the erasure ended ${done.status} with ${done.messages} messages`);
    }
    console.log(
      `${database.dialect}: one person's ${PERSONS_MESSAGES} messages among ${recipients.toLocaleString('en')} ` +
        `recipient rows (${(recipients / PER_SEND).toLocaleString('en')} webhook deliveries; seeded in ` +
        `${seeded.toFixed(0)} s): the request ${requestMs.toFixed(1)} ms, the job ${jobMs.toFixed(0)} ms`,
    );
  } finally {
    await database.close();
  }
}

/** The expansion of a send over the list, range by range as startSend runs it, in ms. */
async function expansionMs(database: Database, accountId: string, listId: string, key: Buffer): Promise<number> {
  const sendId = randomUUID();
  await database.db
    .insertInto('sends')
    .values({
      id: sendId,
      account_id: accountId,
      channel: 'sms',
      status: 'Queued',
      content: '{}',
      list_ids: JSON.stringify([listId]),
      webhook_url: null,
      scheduled_at: null,
      created_at: 0,
      started_at: null,
      completed_at: null,
    })
    .execute();
  const allContactsListId = (
    await database.db
      .selectFrom('contact_lists')
      .select('id')
      .where('account_id', '=', accountId)
      .where('is_default', '=', true)
      .executeTakeFirstOrThrow()
  ).id;
  const started = performance.now();
  for (let after: string | null = null; ; ) {
    after = await database.db.transaction().execute((trx) =>
      expandRecipients(trx, database.dialect, {
        channel: 'sms',
        sendId,
        accountId,
        listIds: [listId],
        allContactsListId,
        erasureKey: key,
        after,
        now: 1,
      }),
    );
    if (after === null) break;
  }
  return performance.now() - started;
}

async function consentCheck(url: string, keyring: Keyring): Promise<void> {
  const database = openDatabase(url, { procedures: PROCEDURE_MODULES });
  try {
    await database.ready();
    await migrateToLatest(database);
    const clock = new ManualClock(Date.now());
    const account = await createAccount(database.db, clock, {
      userName: `bench-consent-${process.pid}@example.com`,
      password: 'correct horse battery staple',
    });
    const listId = await seedList(database, account.id, LIST, (n) => mobileContact(`4479${n}`));
    await settle(database);
    const key = await erasureKey(database.db, keyring);
    const none = await expansionMs(database, account.id, listId, key);
    // 10,000 erased people, every tenth of them also on the list: 1,000 recipients refused.
    for (let from = 1; from <= ERASED; from += 2000) {
      await database.db
        .insertInto('erased_suppressions')
        .values(
          Array.from({ length: Math.min(2000, ERASED - from + 1) }, (_, i) => ({
            account_id: account.id,
            channel: 'sms' as const,
            hash: erasedAddress(key, (from + i) % 10 === 0 ? `4479${from + i}` : `4470${from + i}`),
            reason: 'erased',
            created_at: 0,
          })),
        )
        .execute();
    }
    await settle(database);
    const hashed = await expansionMs(database, account.id, listId, key);
    const { rows } = await sql<{ n: number | string }>`
      select count(*) as n from send_recipients where reason = 'suppressed: erased'`.execute(database.db);
    if (Number(rows[0].n) !== ERASED / 10) throw new Error(`${rows[0].n} recipients refused as erased`);
    console.log(
      `${database.dialect}: an expansion of ${LIST.toLocaleString('en')} contacts: ${none.toFixed(0)} ms with no ` +
        `erased suppressions, ${hashed.toFixed(0)} ms with ${ERASED.toLocaleString('en')} ` +
        `(${(ERASED / 10).toLocaleString('en')} recipients refused)`,
    );
  } finally {
    await database.close();
  }
}

console.log(`erasure bench on ${machine()}`);
const keyring = new Keyring(keyFromHex(BENCH_ENCRYPTION_KEY)!);
if (!process.env.BENCH_SKIP_CONSENT) await onEachDatabase('erasure_consent', (url) => consentCheck(url, keyring));
for (const size of SIZES) await onEachDatabase('erasure', (url) => eraseOne(url, size, keyring));
