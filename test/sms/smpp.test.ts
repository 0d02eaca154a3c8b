import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { addSenderName } from '../../src/senders/names.ts';
import { startSmsc, type Smsc, type SmscOptions } from '../../src/sim/smsc.ts';
import { purgeRecordedAnswers } from '../../src/sms/transports/smpp/journal.ts';
import type { MessageView } from '../../src/sim/taken.ts';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer } from '../support/app.ts';
import { waitFor } from '../support/wait.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import type { ApiClient, ApiTest } from '../support/client.ts';
import { startSmppHerald, type SmppHerald } from './smpp-support.ts';

/**
 * The SMPP transport end to end: requests through HTTP, a worker submitting over TCP to the
 * simulator (its own process's code, a real SMPP peer on a socket), receipts coming back as
 * deliver_sm, statuses read through the API and posted to a webhook receiver.
 */
forEachDatabase((dialect) => {
  let smsc: Smsc | undefined;
  let api: ApiTest | undefined;
  let alice: ApiClient;
  let send: SmppHerald['send'];
  let read: SmppHerald['read'];
  let settled: SmppHerald['settled'];
  let events: SmppHerald['events'];
  let receiver: Receiver;
  beforeEach(async () => {
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await api?.worker.stop();
    await api?.close();
    await smsc?.close();
    await receiver.close();
    api = undefined;
    smsc = undefined;
  });

  /** A simulator with these options, and Herald bound to it with `query` in SMS_TRANSPORT. */
  const start = async (options: SmscOptions = {}, query = '') => {
    smsc = await startSmsc({ systemId: 'herald', password: 'secret', receiptDelayMs: 20, ...options });
    ({ api, alice, send, read, settled, events } = await startSmppHerald(
      dialect,
      `smpp://herald:secret@127.0.0.1:${smsc.port}?${query}`,
      receiver,
    ));
  };
  /** What the simulator took, through its control port. */
  const taken = async (recipient?: string) =>
    (
      (await (
        await fetch(`http://127.0.0.1:${smsc!.httpPort}/messages${recipient ? `?recipient=${recipient}` : ''}`)
      ).json()) as { messages: MessageView[] }
    ).messages;

  it('shows SMS_TRANSPORT as the connection default, up with its binds, in GET /admin/smsc', async () => {
    await start({}, 'binds=2');
    const smscView = async () =>
      (await api!.t.app.inject({ method: 'GET', url: '/admin/smsc', headers: bearer(ADMIN_TOKEN) })).json().smsc;
    const [connection] = await waitFor('the binds written', async () => {
      const view = await smscView();
      return view[0].binds === 2 ? view : undefined;
    });
    assert.deepEqual(connection, {
      name: 'default',
      url: `smpp://herald:***@127.0.0.1:${smsc!.port}?binds=2`,
      state: 'up',
      binds: 2,
    });
    await api!.worker.stop();
    assert.deepEqual(
      (await smscView())[0],
      { ...connection, state: 'down', binds: 0 },
      'a worker that stops takes its binds back',
    );
  });

  it(
    'sends a single over SMPP: alphanumeric sender TON 5 / NPI 0, E.164 destination TON 1 / NPI 1, ' +
      'a receipt asked for, Delivered by its receipt and posted',
    async () => {
      await start();
      const queueId = await send('/sms/single', {
        recipient: '919812345678',
        senderName: 'HERALD',
        body: 'Your code is 482913',
        webHookUrl: receiver.url,
      });
      const [message] = await taken('919812345678');
      assert.equal(message.text, 'Your code is 482913');
      assert.deepEqual(message.source, { ton: 5, npi: 0, addr: 'HERALD' });
      assert.deepEqual(message.destination, { ton: 1, npi: 1, addr: '919812345678' });
      assert.deepEqual([message.dataCoding, message.parts[0].registeredDelivery, message.parts[0].esmClass], [0, 1, 0]);

      const view = await settled(queueId);
      const [recipient] = view.recipients;
      assert.equal(recipient.status, 'Delivered');
      assert.deepEqual(
        recipient.history.map((h: { status: string }) => h.status),
        ['Queued', 'Submitted', 'Delivered'],
      );
      assert.deepEqual(recipient.partStatus, [
        { part: 1, operatorMessageId: message.parts[0].messageId, status: 'Delivered' },
      ]);
      assert.deepEqual(
        (await events()).map((e) => [e.queueId, e.recipient, e.status]),
        [
          [queueId, '919812345678', 'Submitted'],
          [queueId, '919812345678', 'Delivered'],
        ],
      );
    },
  );

  it('sends a batch from a numeric sender as TON 1 / NPI 1, every recipient Delivered', async () => {
    await start();
    const byAdmin = { actor: 'admin' as const, ip: null, at: api!.clock.now() };
    await addSenderName(api!.t.ctx.db, api!.clock, {
      accountId: alice.account.row.id,
      name: '447700900123',
      by: byAdmin,
      defaultSenderName: 'HERALD',
    });
    const recipients = ['919812300001', '919812300002', '919812300003'];
    const queueId = await send('/sms/batch', {
      recipients: recipients.map((mobileNo) => ({ mobileNo })),
      senderName: '447700900123',
      body: 'Your order shipped.',
    });
    const messages = await taken();
    assert.deepEqual(messages.map((m) => m.recipient).sort(), recipients);
    for (const message of messages) assert.deepEqual(message.source, { ton: 1, npi: 1, addr: '447700900123' });
    assert.deepEqual((await settled(queueId)).totals, { Delivered: 3 });
    // Each answer was kept until its message's outcome was recorded; the retention sweep then drops it.
    assert.equal((await api!.t.ctx.db.selectFrom('smpp_submits').selectAll().execute()).length, 3);
    assert.equal(await purgeRecordedAnswers(api!.t.ctx.database, 0, 1000), 3);
  });

  it('sends 161 GSM-7 and 71 UCS-2 characters as two concatenated parts each, joined whole at the SMSC', async () => {
    await start();
    const gsm = `${'0123456789'.repeat(16)}@`;
    const ucs2 = `${'ü'.repeat(35)}${'日'.repeat(36)}`;
    const first = await send('/sms/single', { recipient: '919812300011', senderName: 'HERALD', body: gsm });
    const second = await send('/sms/single', { recipient: '919812300012', senderName: 'HERALD', body: ucs2 });
    const [long] = await taken('919812300011');
    assert.equal(long.complete, true);
    assert.equal(long.text, gsm);
    assert.equal(long.dataCoding, 0);
    assert.deepEqual(
      long.parts.map((p) => [p.esmClass, p.concatenation?.total, p.concatenation?.sequence]),
      [
        [0x40, 2, 1],
        [0x40, 2, 2],
      ],
    );
    const [wide] = await taken('919812300012');
    assert.equal(wide.complete, true);
    assert.equal(wide.text, ucs2);
    assert.equal(wide.dataCoding, 8);
    assert.equal(wide.parts.length, 2);
    for (const queueId of [first, second]) {
      const [recipient] = (await settled(queueId)).recipients;
      assert.deepEqual(
        [recipient.status, recipient.parts, recipient.partStatus.map((p: { status: string }) => p.status)],
        ['Delivered', 2, ['Delivered', 'Delivered']],
      );
    }
  });

  for (const [idFormat, receiptIdFormat] of [
    ['hex', 'decimal'],
    ['decimal', 'hex'],
  ] as const) {
    it(
      `matches receipts written in ${receiptIdFormat} to submits answered in ${idFormat} (zero-padded), ` +
        "Delivered and Failed posted with the receipt's error",
      async () => {
        // Outcomes alternate by the order the simulator takes the submits: read back from it.
        let draws = 0;
        await start({
          idFormat,
          receiptIdFormat,
          idWidth: 10,
          firstId: 3000,
          outcomes: { UNDELIV: 0.5 },
          random: () => (draws++ % 2 === 0 ? 0.1 : 0.9),
        });
        const recipients = ['919812300021', '919812300022', '919812300023', '919812300024'];
        const queueId = await send('/sms/batch', {
          recipients: recipients.map((mobileNo) => ({ mobileNo })),
          senderName: 'HERALD',
          body: 'Hello',
          webHookUrl: receiver.url,
        });
        const outcomeOf = new Map((await taken()).map((m) => [m.recipient, m.parts[0].outcome]));
        assert.deepEqual([...outcomeOf.values()].sort(), ['DELIVRD', 'DELIVRD', 'UNDELIV', 'UNDELIV']);
        const view = await settled(queueId);
        for (const recipient of view.recipients) {
          const delivered = outcomeOf.get(recipient.recipient) === 'DELIVRD';
          const expected = delivered ? ['Delivered', null] : ['Failed', '001'];
          assert.deepEqual([recipient.status, recipient.errorCode], expected, recipient.recipient);
        }
        const final = (await events()).filter((e) => e.status !== 'Submitted');
        assert.deepEqual(
          final.map((e) => [e.recipient, e.status, e.errorCode]).sort(),
          recipients
            .map((r) => (outcomeOf.get(r) === 'DELIVRD' ? [r, 'Delivered', null] : [r, 'Failed', '001']))
            .sort(),
        );
        assert.equal(
          (await api!.t.ctx.db.selectFrom('sms_receipts').selectAll().execute()).length,
          0,
          'no receipt left unmatched',
        );
      },
    );
  }

  it(
    'makes a two-part message Processed by its parts’ intermediate receipts and Delivered only by both final ones; ' +
      'Failed when one part fails',
    async () => {
      // The simulator holds the final receipts until the test lets each go. Outcomes by the order
      // it takes the parts: both of the first message's DELIVRD, the second's DELIVRD then UNDELIV.
      const draws = [0.9, 0.9, 0.9, 0.1];
      await start({ enroute: true, holdReceipts: true, outcomes: { UNDELIV: 0.5 }, random: () => draws.shift()! });
      const history = (recipient: { history: Array<{ status: string }> }) => recipient.history.map((h) => h.status);
      /**
       * Once the message is `status` with its parts `parts` (in any order). Both are waited for:
       * a read takes the message, then its parts, and may see a receipt applied in between.
       */
      const until = (queueId: string, status: string, parts: string[]) =>
        waitFor(`${queueId} ${status}, its parts ${parts.join(', ')}`, async () => {
          const [recipient] = (await read(queueId)).recipients;
          const statuses = recipient.partStatus.map((p: { status: string }) => p.status);
          return recipient.status === status && statuses.sort().join() === parts.sort().join() ? true : undefined;
        });
      /** Sends a two-part message, then its final receipts one at a time; its recipient once both are in. */
      const sendTwoParts = async (recipient: string) => {
        const queueId = await send('/sms/single', { recipient, senderName: 'HERALD', body: 'x'.repeat(161) });
        await until(queueId, 'Processed', ['Processed', 'Processed']);
        assert.equal(smsc!.releaseReceipts(1), 1);
        // Not Delivered (nor Failed) on its first part's receipt.
        await until(queueId, 'Processed', ['Delivered', 'Processed']);
        assert.equal(smsc!.releaseReceipts(), 1);
        const [settledRecipient] = (await settled(queueId)).recipients;
        return settledRecipient;
      };

      const delivered = await sendTwoParts('919812300031');
      assert.deepEqual(history(delivered), ['Queued', 'Submitted', 'Processed', 'Delivered']);

      const failed = await sendTwoParts('919812300032');
      const [message] = await taken('919812300032');
      assert.deepEqual(message.parts.map((p) => p.outcome).sort(), ['DELIVRD', 'UNDELIV']);
      assert.equal(failed.status, 'Failed');
      assert.deepEqual(failed.partStatus.map((p: { status: string }) => p.status).sort(), ['Delivered', 'Failed']);
      assert.deepEqual(history(failed), ['Queued', 'Submitted', 'Processed', 'Failed']);
    },
  );

  it('applies a receipt that comes before the answer to its submit', async () => {
    await start({ receiptBeforeResponse: true });
    const queueId = await send('/sms/batch', {
      recipients: [{ mobileNo: '919812300041' }, { mobileNo: '919812300042' }],
      senderName: 'HERALD',
      body: 'early',
    });
    const view = await settled(queueId);
    assert.deepEqual(view.totals, { Delivered: 2 });
    for (const recipient of view.recipients)
      assert.deepEqual(
        recipient.history.map((h: { status: string }) => h.status),
        ['Queued', 'Submitted', 'Delivered'],
      );
    assert.equal(
      (await api!.t.ctx.db.selectFrom('sms_receipts').selectAll().execute()).length,
      0,
      'no receipt left unmatched',
    );
  });

  it(
    'never sends again a part whose answer an earlier try recorded: ' +
      'only the missing part goes, under the recorded id',
    async () => {
      await start();
      const response = await alice.post('/sms/single', {
        recipient: '919812300061',
        senderName: 'HERALD',
        body: 'z'.repeat(200),
      });
      assert.equal(response.statusCode, 202, response.body);
      const queueId = response.json().data.QueueId as string;
      // As a try cut short would leave it: part 1 answered and recorded, part 2 not.
      await api!.t.ctx.db
        .insertInto('smpp_submits')
        .values({
          send_id: queueId,
          recipient: '919812300061',
          part: 1,
          parts: 2,
          operator_message_id: 'earlier-1',
          at: api!.clock.now(),
        })
        .execute();
      await api!.drain();
      const [message] = await taken('919812300061');
      assert.deepEqual(
        message.parts.map((p) => p.concatenation?.sequence),
        [2],
      );
      const [recipient] = (await read(queueId)).recipients;
      assert.deepEqual(
        recipient.partStatus.map((p: { operatorMessageId: string }) => p.operatorMessageId),
        ['earlier-1', message.parts[0].messageId],
      );
      await waitFor('part 2 delivered', async () =>
        (await read(queueId)).recipients[0].partStatus[1].status === 'Delivered' ? true : undefined,
      );
      assert.equal(
        (await read(queueId)).recipients[0].status,
        'Submitted',
        'not Delivered while part 1 has no receipt',
      );
    },
  );

  it('fails a message the SMSC refuses for good, with the SMPP command_status as its error code', async () => {
    await start({ rejectDestinations: /^919812300051$/ });
    const queueId = await send('/sms/batch', {
      recipients: [{ mobileNo: '919812300051' }, { mobileNo: '919812300052' }],
      senderName: 'HERALD',
      body: 'hi',
      webHookUrl: receiver.url,
    });
    const view = await settled(queueId);
    const refused = view.recipients.find((r: { recipient: string }) => r.recipient === '919812300051');
    assert.deepEqual([refused.status, refused.parts, refused.errorCode], ['Failed', 1, '0x0000000B']);
    assert.match(refused.error, /0x0000000B/);
    assert.equal(view.recipients.find((r: { recipient: string }) => r.recipient === '919812300052').errorCode, null);
    const event = (await events()).find((e) => e.recipient === '919812300051');
    assert.deepEqual([event?.status, event?.errorCode], ['Failed', '0x0000000B']);
  });

  it('leaves a message the SMSC refuses for now Queued, and the queue sends it again later, once', async () => {
    await start({ rejectDestinations: /^919812300081$/, rejectStatus: 0x08 });
    const queueId = await send('/sms/batch', {
      recipients: [{ mobileNo: '919812300081' }, { mobileNo: '919812300082' }],
      senderName: 'HERALD',
      body: 'later',
    });
    const refused = (await read(queueId)).recipients.find((r: { recipient: string }) => r.recipient === '919812300081');
    assert.deepEqual([refused.status, refused.error], ['Queued', null]);
    assert.equal((await read(queueId)).status, 'Sending');
    // The other's receipt is in before the SMSC goes away with those it had still to send.
    await waitFor('the receipt of the message taken', async () =>
      (await read(queueId)).totals.Delivered === 1 ? true : undefined,
    );
    // The SMSC takes it again: the same port, no refusal.
    const port = smsc!.port;
    await smsc!.close();
    smsc = await startSmsc({ port, systemId: 'herald', password: 'secret', receiptDelayMs: 20 });
    api!.clock.advance(5_000);
    await waitFor('the bind back', async () =>
      (await api!.t.app.inject({ method: 'GET', url: '/metrics' })).body.includes(
        'herald_smpp_binds{smsc="default",state="bound"} 2',
      )
        ? true
        : undefined,
    );
    await api!.drain();
    const view = await settled(queueId);
    assert.deepEqual([view.status, view.totals], ['Completed', { Delivered: 2 }]);
    assert.deepEqual(
      (await taken()).map((m) => m.recipient),
      ['919812300081'],
    );
  });

  it('loses nothing and sends no answered part twice when the SMSC throttles and drops the connection ' +
    'in the middle of a 5,000-recipient batch', {
    timeout: 120_000,
  }, async () => {
    // Each bind may make 400 submits a second, a hundredth of submits are throttled whatever
    // the rate (a machine busy with other work may never reach 400 a second) and another
    // hundredth find the SMSC's queue full, and each connection is hung up on after its
    // 1,200th answer.
    await start(
      { tps: 400, throttledShare: 0.01, queueFullShare: 0.01, dropAfterSubmits: 1200, receiptDelayMs: 50 },
      'binds=2&window=50',
    );
    const list = await alice.createList('Everyone');
    const numbers = Array.from({ length: 5000 }, (_, i) => String(9812400000 + i));
    for (let i = 0; i < numbers.length; i += 1000) {
      const batch = await alice.upsert(
        numbers
          .slice(i, i + 1000)
          .map((mobileNumber) => ({ mobileCountryCode: '91', mobileNumber, mobileOptIn: true })),
        { listId: list },
      );
      assert.equal(batch.status, 'Completed', JSON.stringify(batch));
    }
    const queueId = await send('/sms/batch', { listId: [list], senderName: 'HERALD', body: 'Sale today' });
    const view = await waitFor('5,000 deliveries', async () => {
      const current = await read(queueId);
      return current.totals.Delivered === 5000 ? current : undefined;
    });
    assert.deepEqual(view.totals, { Delivered: 5000 });
    const stats = smsc!.stats();
    assert.ok(stats.submits.throttled > 0, 'the SMSC throttled');
    assert.ok(stats.submits.queueFull > 0, 'the SMSC’s queue was full');
    assert.ok(stats.drops >= 3, `the SMSC dropped connections (${stats.drops})`);
    assert.equal(stats.submits.accepted, 5000, 'every message taken once: no answered submit was sent again');
    const recipients = (await taken()).map((m) => m.recipient);
    assert.equal(new Set(recipients).size, 5000);
    const metrics = (await api!.t.app.inject({ method: 'GET', url: '/metrics' })).body;
    assert.match(metrics, /herald_smpp_resubmits_total\{smsc="default",reason="throttled"\} [1-9]/);
    assert.match(metrics, /herald_smpp_responses_total\{smsc="default",status="0x00000000"\} 5000/);
    // At least one receipt each: the SMSC offers again those it sent on a connection it then dropped.
    assert.ok(Number(/herald_smpp_receipts_total\{smsc="default",state="DELIVRD"\} (\d+)/.exec(metrics)?.[1]) >= 5000);
    assert.match(metrics, /herald_smpp_binds\{smsc="default",state="bound"\} \d/);
    assert.match(metrics, /herald_smpp_window_in_use\{smsc="default"\} 0/);
  });
});
