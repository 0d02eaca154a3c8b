import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { emitWebhook } from '../../src/webhooks/outbox.ts';
import { createWorker } from '../../src/server/worker.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startReceiver, type Receiver } from './support.ts';

forEachDatabase((dialect) => {
  let t: TestApp;
  let receiver: Receiver;
  beforeEach(async () => {
    t = await startTestApp(dialect, { clock: new ManualClock(Date.now()), env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await receiver.close();
    await t.close();
  });

  it('delivers an event through the queue once its transaction commits, and retries it on the schedule', async () => {
    const account = await t.createAccount();
    const worker = createWorker(t.ctx);
    await assert.rejects(
      t.ctx.db.transaction().execute(async (trx) => {
        await emitWebhook(trx, t.clock, {
          accountId: account.row.id,
          url: receiver.url,
          type: 'contacts.batch',
          data: { n: 1 },
        });
        throw new Error('rolled back');
      }),
    );
    const id = await t.ctx.db.transaction().execute((trx) =>
      emitWebhook(trx, t.clock, {
        accountId: account.row.id,
        url: receiver.url,
        type: 'contacts.batch',
        data: { n: 2 },
      }),
    );
    receiver.reply({ status: 503 });
    await worker.drain();
    assert.equal(receiver.received.length, 1);
    t.clock.advance(5_000);
    await worker.drain();
    assert.equal(receiver.received.length, 2);
    assert.deepEqual(
      receiver.received.map((post) => JSON.parse(post.body).data),
      [{ n: 2 }, { n: 2 }],
    );
    assert.deepEqual(
      receiver.received.map((post) => post.headers['webhook-id']),
      [id, id],
    );
    const row = await t.ctx.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, 'delivered');
    assert.equal(row.attempts, 2);
    assert.deepEqual(await t.ctx.db.selectFrom('jobs').selectAll().execute(), []);
  });
});
