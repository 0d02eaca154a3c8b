/**
 * Status events through the webhook outbox, on SQLite and PostgreSQL: appended 500 a
 * transaction (a page of a send's results), then gathered by the queue's `webhook.gather`
 * job into deliveries of 500; and appended one a transaction (receipts that come alone).
 * The posts themselves are not made: deliver.ts's cost is per post, not per event.
 * MESSAGING.md's budget for events and webhooks is ~10 µs a message at 10,000 SMS/s.
 *
 *   node bench/webhook-events.ts
 *   BENCH_EVENTS=20000 node bench/webhook-events.ts
 */
import { createAccount } from '../src/accounts/service.ts';
import { ManualClock } from '../src/clock.ts';
import { migrateToLatest, openDatabase, type Database } from '../src/db/database.ts';
import { Worker } from '../src/queue/worker.ts';
import { generateKey, Keyring } from '../src/sealed.ts';
import { appendWebhookEvents, GATHER_KIND, GATHER_WINDOW_MS, webhookGatherHandler } from '../src/webhooks/events.ts';
import { onEachDatabase } from './herald-process.ts';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 100_000);
const PAGE = 500;
const SINGLES = 2_000;

const statusEvent = (n: number) => ({
  queueId: '0b9f6d7e-3c1a-4f5e-9a8b-7c6d5e4f3a2b',
  messageId: `5f0c${String(n).padStart(28, '0')}`,
  recipient: `4479${String(n).padStart(8, '0')}`,
  status: 'Delivered',
  errorCode: null,
  error: null,
  parts: 1,
  at: '2026-11-23T12:00:00.000Z',
});

async function run(url: string): Promise<void> {
  const database: Database = openDatabase(url);
  try {
    await migrateToLatest(database);
    const clock = new ManualClock(Date.now());
    const account = await createAccount(database.db, clock, {
      userName: `bench-${process.pid}@example.com`,
      password: 'correct horse battery staple',
    });
    const stream = { accountId: account.id, url: 'https://hooks.example.com/herald', type: 'sms.status' };
    const worker = new Worker({ database, clock });
    worker.register(GATHER_KIND, webhookGatherHandler({ database, clock, encryptionKey: new Keyring(generateKey()) }));

    let started = performance.now();
    for (let start = 0; start < EVENTS; start += PAGE) {
      const events = Array.from({ length: Math.min(PAGE, EVENTS - start) }, (_, i) => statusEvent(start + i));
      await database.db.transaction().execute((trx) => appendWebhookEvents(trx, clock, { ...stream, events }));
    }
    const appendMs = performance.now() - started;

    clock.advance(GATHER_WINDOW_MS);
    started = performance.now();
    await worker.drain();
    const gatherMs = performance.now() - started;
    const { count } = await database.db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .executeTakeFirstOrThrow();

    started = performance.now();
    for (let n = 0; n < SINGLES; n++) {
      await database.db
        .transaction()
        .execute((trx) => appendWebhookEvents(trx, clock, { ...stream, events: [statusEvent(n)] }));
    }
    const singleMs = performance.now() - started;

    const perEvent = (ms: number, n: number) => ((ms * 1000) / n).toFixed(1);
    console.log(
      `${database.dialect}: ${EVENTS} events, ${PAGE} a transaction: append ${perEvent(appendMs, EVENTS)} µs/event, ` +
        `gather ${perEvent(gatherMs, EVENTS)} µs/event into ${Number(count)} deliveries; ` +
        `${Math.round(EVENTS / ((appendMs + gatherMs) / 1000))} events/s appended and gathered; ` +
        `one event a transaction: ${perEvent(singleMs, SINGLES)} µs/append`,
    );
  } finally {
    await database.close();
  }
}

await onEachDatabase('events', run);
