import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../src/clock.ts';
import { dropUnsent } from '../../src/email/record.ts';
import { foldUsage } from '../../src/messaging/rollup.ts';
import { failUnsent } from '../../src/sms/send.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { buildBatch } from '../email/support.ts';

// A send whose job died (its onDead): what it had not sent ends with the channel's word and
// the job's error, in its history, posted and counted, and the send is Completed.
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let receiver: Receiver;
  beforeEach(async () => {
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()) });
    alice = await api.client();
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await receiver.close();
    await api.close();
  });

  const later = () => new Date(api.clock.now() + 3_600_000).toISOString();
  const giveUp = (end: typeof failUnsent, sendId: string) =>
    api.t.ctx.db.transaction().execute((trx) => end(trx, dialect, api.clock, sendId, 'worker lost'));
  async function posted() {
    api.clock.advance(1500);
    await api.drain();
    const secret = (await alice.get('/webhooks/secret')).json().secret as string;
    return receiver.received.flatMap(
      (post) =>
        (
          new Webhook(secret).verify(post.body, post.headers as Record<string, string>) as {
            data: Array<Record<string, unknown>>;
          }
        ).data,
    );
  }
  const counted = async (status: string) => {
    await api.t.ctx.database.call(foldUsage, {});
    const row = await api.t.ctx.db
      .selectFrom('usage_rollup')
      .select((eb) => eb.fn.sum<number>('messages').as('n'))
      .where('account_id', '=', alice.account.row.id)
      .where('status', '=', status)
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  };

  it('fails the SMS a send had not sent, with the error, posted, counted, the send Completed', async () => {
    const queueId = await alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'x',
      scheduleDateTime: later(),
      webHookUrl: receiver.url,
      recipients: [{ mobileNo: '919812300001' }, { mobileNo: '919812300002' }],
    });
    await giveUp(failUnsent, queueId);
    const read = (await alice.get(`/sms/${queueId}`)).json();
    assert.equal(read.status, 'Completed');
    assert.deepEqual(
      read.recipients.map((r: { status: string; error: string; history: Array<{ status: string }> }) => [
        r.status,
        r.error,
        r.history.map((h) => h.status),
      ]),
      [
        ['Failed', 'not sent: worker lost', ['Scheduled', 'Failed']],
        ['Failed', 'not sent: worker lost', ['Scheduled', 'Failed']],
      ],
    );
    assert.deepEqual((await posted()).map((e) => [e.recipient, e.status, e.error]).sort(), [
      ['919812300001', 'Failed', 'not sent: worker lost'],
      ['919812300002', 'Failed', 'not sent: worker lost'],
    ]);
    assert.equal(await counted('Failed'), 2);
  });

  it('drops the emails a batch had not handed over, with the error, posted, counted, the batch Completed', async () => {
    const batchId = await alice.accept(
      '/email/batch',
      buildBatch(
        { scheduleDateTime: later(), webHookUrl: receiver.url },
        { recipients: [{ to: 'ada@example.com' }, { to: 'bob@example.com' }] },
      ),
    );
    await giveUp(dropUnsent, batchId);
    const read = (await alice.get(`/email/batch/${batchId}`)).json();
    assert.equal(read.status, 'Completed');
    assert.deepEqual(
      read.recipients.map((r: { status: string; reason: string }) => [r.status, r.reason]),
      [
        ['Dropped', 'not sent: worker lost'],
        ['Dropped', 'not sent: worker lost'],
      ],
    );
    assert.deepEqual((await posted()).map((e) => [e.email, e.event, e.reason]).sort(), [
      ['ada@example.com', 'Dropped', 'not sent: worker lost'],
      ['bob@example.com', 'Dropped', 'not sent: worker lost'],
    ]);
    assert.equal(await counted('Dropped'), 2);
  });
});
