import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { Worker } from '../../src/queue/worker.ts';
import { SMS_SEND_KIND, SMS_SINGLE_KIND } from '../../src/sms/accept.ts';
import { expireAll, expiryReason } from '../../src/sms/expiry.ts';
import { applyReceipts } from '../../src/sms/receipts.ts';
import { smsSendHandler } from '../../src/sms/send.ts';
import { recipientZone } from '../../src/messaging/recipient-zone.ts';
import { smsSingleHandler } from '../../src/sms/single.ts';
import type { SmsTransport } from '../../src/sms/transport.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { waitForLockWait } from '../support/wait.ts';

const HOUR = 60 * 60_000;

/**
 * Messages an operator took and never reported on: a transport of the test's own that accepts every
 * part and sends no receipt.
 */
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let bob: ApiClient;
  let worker: Worker;
  beforeEach(async () => {
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()) });
    alice = await api.client();
    bob = await api.client();
    const transport: SmsTransport = {
      async submit(messages) {
        return messages.map((m) => ({
          accepted: true as const,
          operatorMessageIds: m.segmented.parts.map((_, i) => `op-${m.recipient}-${i + 1}`),
        }));
      },
      async close() {},
    };
    worker = new Worker({ database: api.t.ctx.database, clock: api.clock });
    worker.register(SMS_SEND_KIND, smsSendHandler({ ...api.t.ctx, transport, zoneOf: recipientZone }), {
      concurrency: 1,
    });
    worker.register(SMS_SINGLE_KIND, smsSingleHandler({ ...api.t.ctx, transport }), { concurrency: 4 });
  });
  afterEach(() => api.close());

  const sent = async (client: ApiClient, path: string, body: object) => {
    const response = await client.post(path, { senderName: 'HERALD', webHookUrl: 'http://127.0.0.1:9/sms', ...body });
    assert.equal(response.statusCode, 202, response.body);
    await worker.drain();
    return response.json().data.QueueId as string;
  };
  const recipients = async (client: ApiClient, queueId: string) =>
    (await client.get(`/sms/${queueId}`)).json().recipients as Array<{
      recipient: string;
      status: string;
      error: string | null;
      history: Array<{ status: string }>;
      partStatus: Array<{ status: string }>;
    }>;
  const events = async () =>
    (await api.t.ctx.db.selectFrom('webhook_events').select('events').execute())
      .flatMap((row) => JSON.parse(row.events) as Array<{ recipient: string; status: string; error: string | null }>)
      .filter((e) => e.status === 'Failed');

  it(
    'ends Failed, with its reason, history and webhook event, a message with no final receipt once the timeout ' +
      'has passed, and no other',
    async () => {
      const batch = await sent(alice, '/sms/batch', {
        recipients: [{ mobileNo: '919812300001' }, { mobileNo: '919812300002' }, { mobileNo: '919812300003' }],
        body: 'x'.repeat(161),
      });
      const single = await sent(bob, '/sms/single', { recipient: '919812300004', body: 'Your code is 1234' });
      const report = (id: string, state: string) =>
        api.t.ctx.database.db.transaction().execute((trx) =>
          applyReceipts(trx, dialect, api.clock, {
            receipts: [{ smsc: 'default', operatorMessageId: id, state, errorCode: null }],
          }),
        );
      await report('op-919812300001-1', 'DELIVRD');
      await report('op-919812300001-2', 'DELIVRD');
      await report('op-919812300002-1', 'DELIVRD');
      await report('op-919812300002-2', 'ENROUTE');

      api.clock.advance(47 * HOUR);
      assert.equal(await expireAll(api.t.ctx.database, api.clock.now(), 48), 0, 'not before the timeout');
      api.clock.advance(HOUR + 1);
      const later = await sent(alice, '/sms/single', { recipient: '919812300005', body: 'sent since' });
      assert.equal(await expireAll(api.t.ctx.database, api.clock.now(), 48), 3);

      const byNumber = new Map((await recipients(alice, batch)).map((r) => [r.recipient, r]));
      assert.equal(byNumber.get('919812300001')!.status, 'Delivered', 'a delivered message stays so');
      const processed = byNumber.get('919812300002')!;
      assert.deepEqual([processed.status, processed.error], ['Failed', expiryReason(48)]);
      assert.deepEqual(
        processed.partStatus.map((p) => p.status),
        ['Delivered', 'Failed'],
        'its delivered part stays Delivered',
      );
      assert.deepEqual(
        byNumber.get('919812300003')!.history.map((h) => h.status),
        ['Queued', 'Submitted', 'Failed'],
      );
      assert.equal((await recipients(bob, single))[0].status, 'Failed');
      assert.equal(
        (await recipients(alice, later))[0].status,
        'Submitted',
        'a send completed within the timeout is left alone',
      );
      assert.deepEqual((await events()).map((e) => [e.recipient, e.error]).sort(), [
        ['919812300002', expiryReason(48)],
        ['919812300003', expiryReason(48)],
        ['919812300004', expiryReason(48)],
      ]);
      assert.equal(await expireAll(api.t.ctx.database, api.clock.now(), 48), 0, 'a second run finds nothing');
    },
  );

  it(
    'applies a receipt left waiting beside its recorded part (a crash between a transaction and its second look) ' +
      'rather than expiring the message',
    async () => {
      const single = await sent(alice, '/sms/single', { recipient: '919812300006', body: 'Your code is 1234' });
      await api.t.ctx.db
        .insertInto('sms_receipts')
        .values({
          smsc: 'default',
          operator_message_id: 'op-919812300006-1',
          status: 'Delivered',
          error_code: null,
          at: api.clock.now(),
        })
        .execute();
      api.clock.advance(49 * HOUR);
      assert.equal(await expireAll(api.t.ctx.database, api.clock.now(), 48), 0);
      const [recipient] = await recipients(alice, single);
      assert.deepEqual(
        recipient.history.map((h) => h.status),
        ['Queued', 'Submitted', 'Delivered'],
      );
      assert.equal((await api.t.ctx.db.selectFrom('sms_receipts').selectAll().execute()).length, 0);
    },
  );
  it('leaves a message a receipt ends while the timeout ends it', async () => {
    const single = await sent(bob, '/sms/single', { recipient: '919812300004', body: 'Your code is 1234' });
    api.clock.advance(49 * HOUR);
    // A receipt's transaction, Delivered written and not yet committed as the expiry reads.
    const committing = Promise.withResolvers<void>();
    const receipt = api.t.ctx.db.transaction().execute(async (trx) => {
      await trx.updateTable('send_recipients').set({ status: 'Delivered' }).where('send_id', '=', single).execute();
      await committing.promise;
    });
    let settled = false;
    const expiring = expireAll(api.t.ctx.database, api.clock.now(), 48).finally(() => (settled = true));
    if (dialect === 'postgres')
      await waitForLockWait(api.t.ctx.db, 'the expiry to wait for the receipt', () => settled);
    committing.resolve();
    await receipt;
    assert.equal(await expiring, 0);
    const [recipient] = await recipients(bob, single);
    assert.equal(recipient.status, 'Delivered');
    assert.deepEqual(await events(), []);
  });
});
