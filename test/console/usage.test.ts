import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { foldUsage } from '../../src/messaging/rollup.ts';
import { ManualClock } from '../../src/clock.ts';
import { recordMailReport } from '../../src/email/inbound.ts';
import { trackingKey } from '../../src/email/tracking.ts';
import { trackingToken } from '../../src/email/tracking-tokens.ts';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, errorFields } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { base64, buildBatch } from '../email/support.ts';

// GET /sms, GET /email/batch, GET /usage and GET /stats: what an account's console reads.
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let bob: ApiClient;
  // 2026-03-10 12:00 UTC.
  const NOON = Date.UTC(2026, 2, 10, 12, 0, 0);
  beforeEach(async () => {
    api = await startApiTest(dialect, {
      clock: new ManualClock(NOON),
      env: { SMS_TRANSPORT: 'sandbox:?fail=^9198111', EMAIL_TRANSPORT: 'sandbox:?bounce=^gone@' },
    });
    alice = await api.client();
    bob = await api.client();
  });
  afterEach(() => api.close());

  const accepted = async (client: ApiClient, path: string, body: object) => {
    const sendId = await client.accept(path, body);
    await api.drain();
    return sendId;
  };
  const sms = (client: ApiClient, recipients: string[], body = 'Hello from Herald') =>
    accepted(client, '/sms/batch', {
      senderName: 'HERALD',
      body,
      recipients: recipients.map((mobileNo) => ({ mobileNo })),
    });
  const setOffset = async (client: ApiClient, timeZoneOffset: string) => {
    const response = await api.t.app.inject({
      method: 'PATCH',
      url: `/admin/accounts/${client.account.row.id}`,
      headers: bearer(ADMIN_TOKEN),
      payload: { timeZoneOffset },
    });
    assert.equal(response.statusCode, 200, response.body);
  };
  const recipientId = async (sendId: string, address: string) =>
    Number(
      (
        await api.t.ctx.db
          .selectFrom('send_recipients')
          .select('id')
          .where('send_id', '=', sendId)
          .where('address', '=', address)
          .executeTakeFirstOrThrow()
      ).id,
    );

  /**
   * The rollup of an account once its deltas are folded into it, summed per channel and status: {
   * 'sms Submitted': [messages, parts] }.
   */
  async function rollup(accountId: string) {
    assert.ok((await api.t.ctx.database.call(foldUsage, {})) > 0, 'the transactions appended deltas');
    assert.equal(await api.t.ctx.database.call(foldUsage, {}), 0, 'a fold takes them all');
    const rows = await api.t.ctx.db
      .selectFrom('usage_rollup')
      .select([
        'channel',
        'status',
        (eb) => eb.fn.sum<number>('messages').as('messages'),
        (eb) => eb.fn.sum<number>('parts').as('parts'),
      ])
      .where('account_id', '=', accountId)
      .groupBy(['channel', 'status'])
      .execute();
    return Object.fromEntries(
      rows.map((row) => [`${row.channel} ${row.status}`, [Number(row.messages), Number(row.parts)]]),
    );
  }

  /** The same counted straight from the messages: each history row, each Cancelled recipient, with its parts. */
  async function counted(accountId: string) {
    const { rows } = await sql<{ channel: string; status: string; messages: number; parts: number }>`
      select channel, status, count(*) as messages, sum(parts) as parts
        from (select s.channel, h.status, coalesce(r.parts, 0) as parts
                from recipient_history h
                join send_recipients r on r.id = h.recipient_id
                join sends s on s.id = r.send_id
               where s.account_id = ${accountId}
              union all
              select s.channel, r.status, 0
                from send_recipients r
                join sends s on s.id = r.send_id
               where s.account_id = ${accountId} and r.status = 'Cancelled') e
       group by channel, status`.execute(api.t.ctx.db);
    return Object.fromEntries(
      rows.map((row) => [`${row.channel} ${row.status}`, [Number(row.messages), Number(row.parts)]]),
    );
  }

  it(
    'keeps the rollup equal to the stored statuses through SMS (Delivered, Failed, NotSent, Cancelled) and email ' +
      '(Delivered, Bounce, Dropped, Open, Click, Unsubscribe, Spam Report), and reports it in /stats and /usage',
    async () => {
      assert.equal((await alice.post('/sms/suppressions', { number: '919812345609' })).statusCode, 201);
      await sms(alice, ['919812345601', '919812345602', '919811111111', '919812345609']);
      // 71 UCS-2 characters: two parts.
      await sms(alice, ['919812345603'], 'Привет'.repeat(12));
      const scheduled = await accepted(alice, '/sms/batch', {
        senderName: 'HERALD',
        body: 'later',
        recipients: [{ mobileNo: '919812345604' }],
        scheduleDateTime: '2026-03-11T09:00:00Z',
      });
      const cancel = await api.t.app.inject({
        method: 'DELETE',
        url: `/sms/${scheduled}`,
        headers: bearer(alice.token),
      });
      assert.equal(cancel.statusCode, 204);

      assert.equal((await alice.post('/email/suppressions', { email: 'blocked@example.com' })).statusCode, 201);
      const emailBody = base64('<p>See <a href="https://shop.example/sale">the sale</a>.</p>');
      const batchId = await accepted(
        alice,
        '/email/batch',
        buildBatch(
          { emailBody },
          {
            recipients: ['ada@example.com', 'grace@example.com', 'gone@example.com', 'blocked@example.com'].map(
              (to) => ({
                to,
              }),
            ),
          },
        ),
      );
      api.clock.advance(10_000);
      const token = (claim: Omit<Parameters<typeof trackingToken>[1], 'sendId'>) =>
        trackingToken(trackingKey(api.t.ctx.encryptionKey).current, { ...claim, sendId: batchId });
      const ada = await recipientId(batchId, 'ada@example.com');
      const person = { 'user-agent': 'Mozilla/5.0 (Macintosh)' };
      for (const url of [
        `/t/o/${token({ recipientId: ada, kind: 'open' })}`,
        `/t/o/${token({ recipientId: ada, kind: 'open' })}`,
        `/t/c/${token({ recipientId: ada, kind: 'click', link: 0 })}`,
      ]) {
        assert.ok([200, 302].includes((await api.t.app.inject({ method: 'GET', url, headers: person })).statusCode));
        // An open a minute after the last is another (email/record.ts, REPEAT_WINDOW_MS).
        api.clock.advance(60_000);
      }
      const unsubscribe = await api.t.app.inject({
        method: 'POST',
        url: `/t/u/${token({ recipientId: ada, kind: 'unsubscribe' })}`,
        headers: { ...person, 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'List-Unsubscribe=One-Click',
      });
      assert.ok(unsubscribe.statusCode < 300, unsubscribe.body);
      const grace = await recipientId(batchId, 'grace@example.com');
      const complaint = await api.t.ctx.database.call(recordMailReport, {
        message: { recipient: { recipientId: grace, sendId: batchId }, messageUuid: null },
        event: { kind: 'complaint', feedbackType: 'abuse' },
        now: api.clock.now(),
      });
      assert.equal('recorded' in complaint && complaint.recorded, 'Spam Report');
      // Bob's send: never in Alice's figures.
      await sms(bob, ['919812345605']);

      const rolled = await rollup(alice.account.row.id);
      assert.deepEqual(rolled, await counted(alice.account.row.id));
      assert.deepEqual(rolled, {
        'sms Submitted': [3, 4],
        'sms Delivered': [3, 4],
        'sms Failed': [1, 1],
        'sms NotSent': [1, 0],
        'sms Cancelled': [1, 0],
        'email Processed': [3, 0],
        'email Delivered': [2, 0],
        'email Bounce': [1, 0],
        'email Dropped': [1, 0],
        'email Open': [2, 0],
        'email Click': [1, 0],
        'email Unsubscribe': [1, 0],
        'email Spam Report': [1, 0],
      });

      // The batch's funnel: recipients with each event, Ada's two opens one recipient.
      assert.deepEqual((await alice.get(`/email/batch/${batchId}`)).json().engagement, {
        opened: 1,
        clicked: 1,
        unsubscribed: 1,
        complaints: 1,
      });

      const stats = async (client: ApiClient, channel: string) => {
        const response = await client.get(`/stats?from=2026-03-10&to=2026-03-10&channel=${channel}`);
        assert.equal(response.statusCode, 200, response.body);
        return response.json().points;
      };
      assert.deepEqual(await stats(alice, 'sms'), [
        {
          start: '2026-03-10T00:00:00.000Z',
          sent: 3,
          delivered: 3,
          failed: 1,
          refused: 1,
          opened: 0,
          clicked: 0,
          unsubscribed: 0,
          complaints: 0,
        },
      ]);
      assert.deepEqual(await stats(alice, 'email'), [
        {
          start: '2026-03-10T00:00:00.000Z',
          sent: 3,
          delivered: 2,
          failed: 1,
          refused: 1,
          opened: 2,
          clicked: 1,
          unsubscribed: 1,
          complaints: 1,
        },
      ]);
      assert.deepEqual((await stats(bob, 'email'))[0], {
        start: '2026-03-10T00:00:00.000Z',
        sent: 0,
        delivered: 0,
        failed: 0,
        refused: 0,
        opened: 0,
        clicked: 0,
        unsubscribed: 0,
        complaints: 0,
      });
      const hourly = (await alice.get('/stats?from=2026-03-10&to=2026-03-10&channel=sms&interval=hour')).json().points;
      assert.equal(hourly.length, 24);
      assert.deepEqual(
        hourly
          .filter((p: { sent: number }) => p.sent > 0)
          .map((p: { start: string; sent: number }) => [p.start, p.sent]),
        [['2026-03-10T12:00:00.000Z', 3]],
      );

      const usage = (await alice.get('/usage?from=2026-03-09&to=2026-03-10')).json();
      assert.deepEqual(
        usage.days.map((d: { date: string }) => d.date),
        ['2026-03-09', '2026-03-10'],
      );
      assert.deepEqual(usage.days[0].sms, { messages: 0, parts: { gsm7: 0, ucs2: 0 }, statuses: {} });
      assert.deepEqual(usage.days[1].sms, {
        messages: 3,
        parts: { gsm7: 2, ucs2: 2 },
        statuses: { Submitted: 3, Delivered: 3, Failed: 1, NotSent: 1, Cancelled: 1 },
      });
      assert.deepEqual(usage.days[1].email, {
        messages: 3,
        statuses: {
          Processed: 3,
          Delivered: 2,
          Bounce: 1,
          Dropped: 1,
          Open: 2,
          Click: 1,
          Unsubscribe: 1,
          'Spam Report': 1,
        },
      });
      assert.deepEqual(usage.totals, { sms: usage.days[1].sms, email: usage.days[1].email, cost: [] });
      const csv = await alice.get('/usage?from=2026-03-09&to=2026-03-10&format=csv');
      assert.equal(csv.statusCode, 200, csv.body);
      assert.match(String(csv.headers['content-type']), /^text\/csv/);
      assert.match(
        String(csv.headers['content-disposition']),
        /^attachment; filename="herald-usage-2026-03-09-to-2026-03-10\.csv"$/,
      );
      assert.deepEqual(csv.body.trimEnd().split('\r\n'), [
        'date,sms_messages,sms_parts_gsm7,sms_parts_ucs2,email_messages,' +
          'sms_cancelled,sms_delivered,sms_failed,sms_notsent,sms_submitted,' +
          'email_bounce,email_click,email_delivered,email_dropped,' +
          'email_open,email_processed,email_spam_report,email_unsubscribe',
        '2026-03-09,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0',
        '2026-03-10,3,2,2,3,1,3,1,1,3,1,1,2,1,2,3,1,1',
      ]);
      const bobs = (await bob.get('/usage?from=2026-03-10&to=2026-03-10')).json();
      assert.deepEqual(bobs.days[0].sms, {
        messages: 1,
        parts: { gsm7: 1, ucs2: 0 },
        statuses: { Submitted: 1, Delivered: 1 },
      });
      assert.deepEqual(bobs.days[0].email, { messages: 0, statuses: {} });
    },
  );

  it('counts a message at 23:30 local time on its local day, and local hours in a half-hour offset', async () => {
    await setOffset(alice, 'UTC+05:30~India Standard Time');
    // 2026-03-10 23:30 in India is 18:00 UTC.
    api.clock.set(Date.UTC(2026, 2, 10, 18, 0, 0));
    await sms(alice, ['919812345601']);
    const usage = (await alice.get('/usage?from=2026-03-10&to=2026-03-11')).json();
    assert.deepEqual(
      usage.days.map((d: { date: string; sms: { messages: number } }) => [d.date, d.sms.messages]),
      [
        ['2026-03-10', 1],
        ['2026-03-11', 0],
      ],
    );
    const daily = (await alice.get('/stats?from=2026-03-10&to=2026-03-11&channel=sms')).json().points;
    assert.deepEqual(
      daily.map((p: { start: string; sent: number }) => [p.start, p.sent]),
      [
        ['2026-03-09T18:30:00.000Z', 1],
        ['2026-03-10T18:30:00.000Z', 0],
      ],
    );
    const hourly = (await alice.get('/stats?from=2026-03-10&to=2026-03-10&channel=sms&interval=hour')).json().points;
    assert.deepEqual(hourly.at(-1), {
      start: '2026-03-10T17:30:00.000Z',
      sent: 1,
      delivered: 1,
      failed: 0,
      refused: 0,
      opened: 0,
      clicked: 0,
      unsubscribed: 0,
      complaints: 0,
    });
    // A UTC account sees it on the 10th too, at 18:00; one at UTC-05:00 on the 10th at 13:00.
    await setOffset(alice, 'UTC-05:00~Eastern Standard Time');
    const eastern = (await alice.get('/usage?from=2026-03-10&to=2026-03-10')).json();
    assert.equal(eastern.days[0].sms.messages, 1);
    await setOffset(alice, 'UTC+06:30~Myanmar Time');
    const yangon = (await alice.get('/usage?from=2026-03-10&to=2026-03-11')).json();
    assert.deepEqual(
      yangon.days.map((d: { sms: { messages: number } }) => d.sms.messages),
      [0, 1],
    );
  });

  it('refuses a date that is not one, a reversed range and one too long, in the error shape', async () => {
    const refused = async (url: string, field: string) => {
      const response = await alice.get(url);
      assert.equal(response.statusCode, 400, `${url}: ${response.body}`);
      assert.equal(response.json().status, 'Failure');
      assert.ok(
        errorFields(response).some((f) => f.includes(field)),
        `${url}: ${response.body}`,
      );
    };
    await refused('/usage?from=2026-02-30&to=2026-03-01', 'from');
    await refused('/usage?from=2026-3-1&to=2026-03-01', 'from');
    await refused('/usage?from=2026-03-01', 'to');
    await refused('/usage?from=2026-03-02&to=2026-03-01', 'to');
    await refused('/usage?from=2025-03-01&to=2026-03-02', 'to');
    await refused('/stats?from=2026-01-01&to=2026-02-01&channel=sms&interval=hour', 'to');
    await refused('/stats?from=2026-01-01&to=2026-01-02&channel=fax', 'channel');
    await refused('/stats?from=2026-01-01&to=2026-01-02', 'channel');
    // A leap year's 366 days, both ends included, is the most.
    assert.equal((await alice.get('/usage?from=2024-01-01&to=2024-12-31')).statusCode, 200);
    assert.equal(
      (await alice.get('/stats?from=2026-01-01&to=2026-01-31&channel=email&interval=hour')).json().points.length,
      744,
    );
    assert.equal(
      (await api.t.app.inject({ method: 'GET', url: '/usage?from=2026-01-01&to=2026-01-02' })).statusCode,
      401,
    );
  });

  it(
    'lists the account’s SMS sends and email batches newest first, a page at a time, each with its read’s totals; ' +
      'another account’s never',
    async () => {
      const sent: string[] = [];
      for (const recipients of [['919812345601'], ['919812345602', '919811111111'], ['919812345603']]) {
        sent.push(await sms(alice, recipients));
        api.clock.advance(1000);
      }
      // Two in the same millisecond: the id orders them.
      const twins = [await sms(alice, ['919812345604']), await sms(alice, ['919812345605'])];
      await sms(bob, ['919812345606']);
      const newest = [...twins.sort().reverse(), ...sent.reverse()];

      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const response = await alice.get(`/sms?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        assert.equal(response.statusCode, 200, response.body);
        const page = response.json();
        assert.ok(page.sends.length <= 2);
        for (const send of page.sends) {
          const read = (await alice.get(`/sms/${send.queueId}`)).json();
          assert.deepEqual(send, {
            queueId: read.queueId,
            createdAt: read.createdAt,
            scheduledAt: read.scheduledAt,
            status: read.status,
            totals: read.totals,
          });
          seen.push(send.queueId);
        }
        cursor = page.nextCursor;
      } while (cursor);
      assert.deepEqual(seen, newest);
      assert.deepEqual((await alice.get(`/sms/${sent[1]}`)).json().totals, { Delivered: 1, Failed: 1 });
      assert.equal((await bob.get('/sms')).json().sends.length, 1);

      const scheduled = await accepted(alice, '/email/batch', buildBatch({ scheduleDateTime: '2026-03-11T09:00:00Z' }));
      const batches = (await alice.get('/email/batch')).json();
      assert.deepEqual(batches, {
        batches: [
          {
            batchId: scheduled,
            createdAt: new Date(api.clock.now()).toISOString(),
            scheduledAt: '2026-03-11T09:00:00.000Z',
            status: 'Scheduled',
            totals: { Scheduled: 1 },
          },
        ],
        nextCursor: null,
      });
      assert.deepEqual((await bob.get('/email/batch')).json(), { batches: [], nextCursor: null });

      for (const url of ['/sms?cursor=bm90LWEtY3Vyc29y', '/sms?limit=101', '/sms?limit=0', '/email/batch?cursor=%3F']) {
        const response = await alice.get(url);
        assert.equal(response.statusCode, 400, `${url}: ${response.body}`);
        assert.equal(response.json().status, 'Failure');
      }
    },
  );
});
