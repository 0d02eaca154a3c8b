import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { Worker } from '../../src/queue/worker.ts';
import { SMS_SEND_KIND } from '../../src/sms/accept.ts';
import { applyReceipts, type Receipt } from '../../src/sms/receipts.ts';
import { smsSendHandler } from '../../src/sms/send.ts';
import type { SmsTransport } from '../../src/sms/transport.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startCrmTest, type CrmClient, type CrmTest } from '../crm/support.ts';

/**
 * Receipts through a transport of the test's own: it accepts every part under an id of its
 * choosing and reports what `receiptsFor` says, either before its results are recorded (as
 * an operator that answers both at once can) or only when the test says.
 */
forEachDatabase((dialect) => {
  let crm: CrmTest;
  let alice: CrmClient;
  let worker: Worker;
  let early: (ids: string[]) => Receipt[];
  beforeEach(async () => {
    crm = await startCrmTest(dialect, { clock: new ManualClock(Date.now()) });
    alice = await crm.client();
    early = () => [];
    const { database } = crm.t.ctx;
    const transport: SmsTransport = {
      async submit(_database, messages) {
        const ids = messages.map((m) => m.segmented.parts.map((_, i) => `op-${m.recipient}-${i + 1}`));
        const receipts = early(ids.flat());
        if (receipts.length > 0) await database.db.transaction().execute((trx) => applyReceipts(trx, dialect, crm.clock, { receipts }));
        return ids.map((operatorMessageIds) => ({ accepted: true as const, operatorMessageIds }));
      },
      async close() {},
    };
    worker = new Worker({ database, clock: crm.clock });
    worker.register(SMS_SEND_KIND, smsSendHandler({ ...crm.t.ctx, transport }), { concurrency: 1 });
  });
  afterEach(() => crm.close());

  const send = async (recipient: string, body: string) => {
    const response = await alice.post('/sms/single', { recipient, senderName: 'HERALD', body });
    assert.equal(response.statusCode, 202, response.body);
    await worker.drain();
    return response.json().data.QueueId as string;
  };
  const recipientOf = async (queueId: string) => (await alice.get(`/sms/${queueId}`)).json().recipients[0];
  const report = (receipts: Receipt[]) => crm.t.ctx.database.db.transaction().execute((trx) => applyReceipts(trx, dialect, crm.clock, { receipts }));

  it('applies a receipt that came before its submit’s result was recorded', async () => {
    early = (ids) => ids.map((operatorMessageId) => ({ operatorMessageId, state: 'DELIVRD', errorCode: null }));
    const queueId = await send('919812345678', 'hi');
    const recipient = await recipientOf(queueId);
    assert.equal(recipient.status, 'Delivered');
    assert.deepEqual(recipient.history.map((h: { status: string }) => h.status), ['Queued', 'Submitted', 'Delivered']);
    assert.equal((await crm.t.ctx.db.selectFrom('sms_receipts').selectAll().execute()).length, 0, 'no receipt left waiting');
  });

  it('makes a two-part message Delivered only when its last part is, and Failed when a part fails', async () => {
    const delivered = await send('919812345678', 'x'.repeat(161));
    await report([{ operatorMessageId: 'op-919812345678-1', state: 'DELIVRD', errorCode: null }]);
    assert.equal((await recipientOf(delivered)).status, 'Submitted');
    await report([{ operatorMessageId: 'op-919812345678-2', state: 'DELIVRD', errorCode: null }]);
    assert.equal((await recipientOf(delivered)).status, 'Delivered');

    const failed = await send('919812300001', 'y'.repeat(161));
    await report([{ operatorMessageId: 'op-919812300001-1', state: 'ENROUTE', errorCode: null }]);
    assert.equal((await recipientOf(failed)).status, 'Processed');
    await report([{ operatorMessageId: 'op-919812300001-2', state: 'UNDELIV', errorCode: '001' }]);
    const recipient = await recipientOf(failed);
    assert.equal(recipient.status, 'Failed');
    assert.deepEqual(recipient.partStatus.map((p: { status: string }) => p.status), ['Processed', 'Failed']);
  });

  it('keeps a receipt for an id it does not know, without failing', async () => {
    await report([{ operatorMessageId: 'never-submitted', state: 'DELIVRD', errorCode: null }]);
    assert.deepEqual((await crm.t.ctx.db.selectFrom('sms_receipts').select('operator_message_id').execute()).map((r) => r.operator_message_id), ['never-submitted']);
  });
});
