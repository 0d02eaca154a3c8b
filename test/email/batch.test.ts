import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../src/clock.ts';
import { PAGE } from '../../src/messaging/pipeline.ts';
import { forEachDatabase } from '../support/databases.ts';
import { bearer } from '../support/app.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { base64, buildBatch, parsedEmails, sandboxEmails, sendBatch, UUID } from './support.ts';

interface EmailEvent {
  batchId: string;
  messageId: string | null;
  email: string;
  event: string;
  reason: string | null;
  reply: string | null;
}

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let receiver: Receiver;
  beforeEach(async () => {
    // Standard Webhooks verifiers check webhook-timestamp against the real time.
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()) });
    alice = await api.client();
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await receiver.close();
    await api.close();
  });

  const read = async (client: ApiClient, batchId: string) => {
    const response = await client.get(`/email/batch/${batchId}`);
    assert.equal(response.statusCode, 200, response.body);
    return response.json();
  };
  /** The email.events posted so far, each post verified with the account's secret. */
  const posted = async (client: ApiClient): Promise<EmailEvent[]> => {
    api.clock.advance(1000);
    await api.drain();
    const secret = (await client.get('/webhooks/secret')).json().secret as string;
    return receiver.received.flatMap((post) => {
      const payload = new Webhook(secret).verify(post.body, post.headers as Record<string, string>) as {
        type: string;
        data: EmailEvent[];
      };
      assert.equal(payload.type, 'email.events');
      return payload.data;
    });
  };

  it(
    'accepts a Base64 body with exactly SPEC §2.7, renders each recipient’s subject, preheader and body, and ' +
      'reads it back',
    async () => {
      const response = await alice.post(
        '/email/batch',
        buildBatch(
          {
            subject: 'Hello [firstName]',
            preHeaderText: 'Your [plan] plan',
            emailBody: base64('<p>Dear [firstName], café ☕ is on us.</p>'),
            replyTo: { email: 'help@mail.localhost', displayName: 'Help' },
          },
          {
            recipients: [
              {
                to: 'Ada@Example.com',
                personalizationSubstitutionTags: [
                  { tagName: '[firstName]', tagValue: 'Ada' },
                  { tagName: '[plan]', tagValue: 'Gold' },
                ],
              },
              { to: 'bob@example.com' },
            ],
          },
        ),
      );
      assert.equal(response.statusCode, 202, response.body);
      const body = response.json();
      assert.deepEqual(Object.keys(body).sort(), ['data', 'message', 'status']);
      assert.equal(body.status, true);
      assert.deepEqual(Object.keys(body.data).sort(), ['BatchId', 'QueuedTimestamp']);
      assert.match(body.data.BatchId, UUID);
      assert.equal(body.data.QueuedTimestamp, api.clock.now());
      assert.equal((await read(alice, body.data.BatchId)).status, 'Queued');
      await api.drain();

      const mails = await parsedEmails(alice);
      assert.deepEqual([...mails.keys()].sort(), ['ada@example.com', 'bob@example.com']);
      const ada = mails.get('ada@example.com')!;
      assert.equal(ada.subject, 'Hello Ada');
      assert.match(String(ada.html), /Your Gold plan/);
      assert.match(String(ada.html), /Dear Ada, café ☕ is on us\./);
      assert.match(ada.text!, /Dear Ada, café ☕ is on us\./, 'the text alternative, substituted too');
      assert.doesNotMatch(ada.text!, /Gold plan/, 'the preheader is the HTML’s hidden first element only');
      assert.match(String(ada.html), /^[\s\S]*?<div[^>]*display:\s*none[^>]*>Your Gold plan/, 'hidden, first');
      assert.equal(ada.from?.value[0].address, 'news@mail.localhost');
      assert.equal(ada.from?.value[0].name, 'Herald News');
      assert.equal(ada.replyTo?.value[0].address, 'help@mail.localhost');
      assert.equal(
        mails.get('bob@example.com')!.subject,
        'Hello',
        'an unresolved tag becomes nothing (the header drops the trailing space)',
      );
      assert.notEqual(ada.messageId, mails.get('bob@example.com')!.messageId, 'a Message-ID per recipient');

      const batch = await read(alice, body.data.BatchId);
      assert.equal(batch.status, 'Completed');
      assert.deepEqual(batch.totals, { Delivered: 2 });
      const first = batch.recipients.find((r: { email: string }) => r.email === 'ada@example.com');
      assert.equal(`<${first.messageId}@mail.localhost>`, ada.messageId);
      assert.deepEqual(
        first.history.map((h: { event: string }) => h.event),
        ['Processed', 'Delivered'],
      );
      // Written in one millisecond, they read in that order whatever order the database hands them in.
      const { db } = api.t.ctx;
      const { id } = await db
        .selectFrom('send_recipients')
        .select('id')
        .where('send_id', '=', body.data.BatchId)
        .where('address', '=', 'ada@example.com')
        .executeTakeFirstOrThrow();
      const kept = await db
        .selectFrom('recipient_history')
        .select(['status', 'at'])
        .where('recipient_id', '=', id)
        .execute();
      await db.deleteFrom('recipient_history').where('recipient_id', '=', id).execute();
      await db
        .insertInto('recipient_history')
        .values(kept.toReversed().map((row) => ({ ...row, recipient_id: id })))
        .execute();
      const again = (await read(alice, body.data.BatchId)).recipients.find(
        (r: { email: string }) => r.email === 'ada@example.com',
      );
      assert.deepEqual(
        again.history.map((h: { event: string }) => h.event),
        ['Processed', 'Delivered'],
      );
      const byMessageId = (await alice.get(`/messages/${first.messageId}`)).json();
      assert.deepEqual(
        byMessageId.history.map((h: { event?: string; status?: string }) => h.event ?? h.status),
        ['Processed', 'Delivered'],
      );
      const [newest] = await sandboxEmails(alice, 'ada@example.com');
      assert.equal(newest.batchId, body.data.BatchId);
      assert.match(newest.raw, /^List-Unsubscribe:\s+<http:\/\/localhost:8080\/t\/u\/[A-Za-z0-9_-]+>/m);
    },
  );

  it(
    'keeps every message of pages handed over at once and rendered ahead, many groups of the sandbox, each once ' +
      'and to its own recipient',
    async () => {
      // Two full pages: the second is read and rendered while the first is handed over and recorded.
      const recipients = Array.from({ length: 2 * PAGE }, (_, i) => ({
        to: `r${i}@example.com`,
        personalizationSubstitutionTags: [{ tagName: '[firstName]', tagValue: `R${i}` }],
      }));
      const batchId = await sendBatch(api, alice, buildBatch({}, { recipients }));
      const response = await alice.get('/sandbox/email?limit=1000');
      assert.equal(response.statusCode, 200, response.body);
      const messages = response.json().messages as Array<{ to: string; raw: string; batchId: string }>;
      assert.equal(messages.length, 2 * PAGE);
      assert.deepEqual(new Set(messages.map((m) => m.to)), new Set(recipients.map((r) => r.to)));
      for (const message of messages) {
        assert.match(message.raw, new RegExp(`^To: ${message.to}\r?$`, 'm'));
        assert.match(
          message.raw,
          new RegExp(`^Subject: Hello R${message.to.slice(1, message.to.indexOf('@'))}\r?$`, 'm'),
        );
      }
      assert.deepEqual((await read(alice, batchId)).totals, { Delivered: 2 * PAGE });
    },
  );

  it('stores campaigns (201, names unique, listed) and sends a batch by emailCampaignId', async () => {
    const created = await alice.post('/email/campaigns', { name: 'Spring sale', html: '<h1>Spring, [firstName]</h1>' });
    assert.equal(created.statusCode, 201, created.body);
    const { emailCampaignId, name } = created.json();
    assert.match(emailCampaignId, UUID);
    assert.equal(name, 'Spring sale');
    assert.equal((await alice.post('/email/campaigns', { name: 'SPRING SALE', html: '<p>x</p>' })).statusCode, 409);
    assert.equal((await alice.post('/email/campaigns', { name: 'Empty', html: ' ' })).statusCode, 400);
    assert.deepEqual((await alice.get('/email/campaigns')).json(), {
      campaigns: [{ emailCampaignId, name: 'Spring sale' }],
      nextCursor: null,
    });
    const bob = await api.client();
    assert.deepEqual((await bob.get('/email/campaigns')).json(), { campaigns: [], nextCursor: null });

    await sendBatch(
      api,
      alice,
      buildBatch(
        { emailBody: undefined, emailCampaignId },
        {
          recipients: [
            { to: 'ada@example.com', personalizationSubstitutionTags: [{ tagName: '[firstName]', tagValue: 'Ada' }] },
          ],
        },
      ),
    );
    assert.match(String((await parsedEmails(alice)).get('ada@example.com')!.html), /<h1>Spring, Ada<\/h1>/);
  });

  it(
    'sends to lists: one email per address whatever its case, the request’s data over the list’s, the most ' +
      'recently updated contact’s, Dropped with the reason for no consent and suppression, every event posted',
    async () => {
      await alice.createProperty('firstName');
      const customers = await alice.createList('Customers');
      const prospects = await alice.createList('Prospects');
      const contact = (email: string, firstName: string, emailOptIn?: boolean) => ({
        email,
        ...(emailOptIn === undefined ? {} : { emailOptIn }),
        propertyfields: [{ propertyname: 'firstName', propertyvalue: firstName }],
      });
      await alice.upsert(
        [
          contact('asha@example.com', 'Asha', true),
          contact('bina@example.com', 'Bina', true),
          contact('chetan@example.com', 'Chetan', false),
          contact('dev@example.com', 'Dev'),
        ],
        { listId: customers },
      );
      await alice.upsert([contact('erin@example.com', 'Erin', true)], { listId: prospects });
      // The same address in the second list, on a contact updated later: its data is the one used.
      api.clock.advance(1000);
      await alice.upsert(
        [{ ...contact('bina@example.com', 'Binita', true), mobileCountryCode: '91', mobileNumber: '9812300002' }],
        { listId: prospects },
      );
      assert.equal(
        (await alice.post('/email/suppressions', { email: 'Erin@Example.com', reason: 'asked us by phone' }))
          .statusCode,
        201,
      );

      const batchId = await sendBatch(
        api,
        alice,
        buildBatch(
          { listId: [customers, prospects, customers], webHookUrl: receiver.url, subject: 'Hi [firstName]' },
          {
            recipients: [
              {
                to: 'ASHA@example.com',
                personalizationSubstitutionTags: [{ tagName: '[firstName]', tagValue: 'Dr Asha' }],
              },
              { to: 'asha@EXAMPLE.com' },
              { to: 'new@example.com' },
              { to: 'chetan@example.com' },
            ],
          },
        ),
      );

      const subjects = new Map([...(await parsedEmails(alice))].map(([to, mail]) => [to, mail.subject]));
      assert.deepEqual(Object.fromEntries(subjects), {
        'asha@example.com': 'Hi Dr Asha',
        'bina@example.com': 'Hi Binita',
        'new@example.com': 'Hi',
      });
      assert.equal((await sandboxEmails(alice)).length, 3, 'one email per address');

      const batch = await read(alice, batchId);
      assert.deepEqual(batch.totals, { Delivered: 3, Dropped: 3 });
      const dropped = Object.fromEntries(
        batch.recipients
          .filter((r: { status: string }) => r.status === 'Dropped')
          .map((r: { email: string; reason: string }) => [r.email, r.reason]),
      );
      assert.deepEqual(Object.keys(dropped).sort(), ['chetan@example.com', 'dev@example.com', 'erin@example.com']);
      assert.match(dropped['chetan@example.com'], /no consent/, 'a manually given address whose contact opted out');
      assert.match(dropped['dev@example.com'], /no consent/, 'a contact created without emailOptIn has none');
      assert.equal(dropped['erin@example.com'], 'suppressed: asked us by phone');

      const events = await posted(alice);
      const words = events.map((e) => `${e.email} ${e.event}`).sort();
      assert.deepEqual(words, [
        'asha@example.com Delivered',
        'asha@example.com Processed',
        'bina@example.com Delivered',
        'bina@example.com Processed',
        'chetan@example.com Dropped',
        'dev@example.com Dropped',
        'erin@example.com Dropped',
        'new@example.com Delivered',
        'new@example.com Processed',
      ]);
      assert.ok(events.every((e) => e.batchId === batchId));
      assert.equal(receiver.received.length, 1, 'gathered into one post');
    },
  );

  it(
    'defers and bounces addresses by the sandbox’s patterns: a hard bounce suppresses; a deferral is tried again ' +
      'after its wait, the job asleep until then, and given up after 72 hours as a soft bounce',
    async () => {
      const sandboxed = await startApiTest(dialect, {
        clock: new ManualClock(Date.now()),
        env: { EMAIL_TRANSPORT: 'sandbox:?defer=^slow@&bounce=^gone@' },
      });
      try {
        const client = await sandboxed.client();
        const response = await client.post(
          '/email/batch',
          buildBatch(
            { webHookUrl: receiver.url },
            { recipients: [{ to: 'ok@example.com' }, { to: 'gone@example.com' }, { to: 'slow@example.com' }] },
          ),
        );
        assert.equal(response.statusCode, 202);
        const batchId = response.json().data.BatchId;
        const firstTry = sandboxed.clock.now();
        await sandboxed.drain();
        let batch = (await client.get(`/email/batch/${batchId}`)).json();
        assert.equal(batch.status, 'Sending');
        assert.deepEqual(batch.totals, { Delivered: 1, Bounce: 1, Deferred: 1 });
        const gone = batch.recipients.find((r: { email: string }) => r.email === 'gone@example.com');
        assert.match(gone.history[1].reply, /^hard bounce: 550 5\.1\.1/);
        const suppressed = (await client.get('/email/suppressions?email=gone@example.com')).json().suppressions;
        assert.match(suppressed[0].reason, /^hard bounce: 550 5\.1\.1/);

        const sendJob = () =>
          sandboxed.t.ctx.db.selectFrom('jobs').select('run_at').where('kind', '=', 'email.send').executeTakeFirst();
        const slowHistory = async () =>
          (await client.get(`/email/batch/${batchId}`))
            .json()
            .recipients.find((r: { email: string }) => r.email === 'slow@example.com').history as Array<{
            event: string;
            reply: string | null;
          }>;
        // Asleep until the deferral's first wait is over (a minute), not polling in between.
        assert.equal(Number((await sendJob())?.run_at), firstTry + 60_000);
        sandboxed.clock.advance(59_999);
        await sandboxed.drain();
        assert.equal((await slowHistory()).length, 2, 'not tried again before its time');
        sandboxed.clock.advance(1);
        await sandboxed.drain();
        assert.deepEqual(
          (await slowHistory()).map((h) => h.event),
          ['Processed', 'Deferred', 'Deferred'],
        );
        assert.equal(Number((await sendJob())?.run_at), firstTry + 60_000 + 5 * 60_000, 'the second wait is longer');

        // Woken at each retry time until 72 hours after the first refusal.
        for (let job = await sendJob(), wakes = 0; job && wakes < 40; job = await sendJob(), wakes++) {
          sandboxed.clock.set(Number(job.run_at));
          await sandboxed.drain();
        }
        batch = (await client.get(`/email/batch/${batchId}`)).json();
        assert.equal(batch.status, 'Completed');
        assert.equal(
          sandboxed.clock.now(),
          firstTry + 72 * 3_600_000,
          'the last try is 72 hours after the first refusal',
        );
        const history = await slowHistory();
        // 1, 5, 15, 30, 60 and 120 minutes, then every 4 hours: 24 refusals before the 72nd hour, the 25th at it.
        assert.deepEqual(
          history.map((h) => h.event),
          ['Processed', ...Array(24).fill('Deferred'), 'Bounce'],
        );
        assert.match(
          history.at(-1)!.reply!,
          /^soft bounce: given up after 72 hours and 25 attempts; the last reply: 451 4\.3\.0/,
        );
        assert.deepEqual(
          (await client.get('/email/suppressions?email=slow@example.com')).json().suppressions,
          [],
          'a soft bounce does not suppress',
        );
        assert.deepEqual(
          (await sandboxEmails(client)).map((m) => m.to),
          ['ok@example.com'],
        );
        // Posted too (read unverified: the signature's timestamp is 72 hours ahead of the verifier's real clock).
        sandboxed.clock.advance(1000);
        await sandboxed.drain();
        const events = receiver.received
          .flatMap((post) => (JSON.parse(post.body) as { data: EmailEvent[] }).data)
          .filter((e) => e.email === 'slow@example.com');
        assert.deepEqual(
          events.map((e) => e.event),
          ['Processed', ...Array(24).fill('Deferred'), 'Bounce'],
          'every try posted',
        );
      } finally {
        await sandboxed.close();
      }
    },
  );

  it('does not try again an address suppressed while its message waited: it ends Dropped', async () => {
    const sandboxed = await startApiTest(dialect, {
      clock: new ManualClock(Date.now()),
      env: { EMAIL_TRANSPORT: 'sandbox:?defer=^slow@' },
    });
    try {
      const client = await sandboxed.client();
      const batch = buildBatch({}, { recipients: [{ to: 'slow@example.com' }] });
      const batchId = await client.accept('/email/batch', batch);
      await sandboxed.drain();
      const added = await client.post('/email/suppressions', { email: 'slow@example.com', reason: 'asked by phone' });
      assert.equal(added.statusCode, 201, added.body);
      sandboxed.clock.advance(60_000);
      await sandboxed.drain();
      const read = (await client.get(`/email/batch/${batchId}`)).json();
      assert.equal(read.status, 'Completed');
      const [slow] = read.recipients;
      assert.deepEqual(
        slow.history.map((h: { event: string }) => h.event),
        ['Processed', 'Deferred', 'Dropped'],
      );
      assert.match(slow.reason, /^suppressed: /);
    } finally {
      await sandboxed.close();
    }
  });

  it('manages suppressions: added lower-cased with a reason, read a page at a time, deleted; per account', async () => {
    const added = await alice.post('/email/suppressions', { email: 'Zed@Example.com' });
    assert.equal(added.statusCode, 201);
    assert.deepEqual(Object.keys(added.json()).sort(), ['createdAt', 'email', 'reason']);
    assert.deepEqual([added.json().email, added.json().reason], ['zed@example.com', 'added by hand']);
    for (const email of ['a.b@example.com', 'c.d@example.com', 'e.f@example.com'])
      assert.equal((await alice.post('/email/suppressions', { email, reason: 'bounced' })).statusCode, 201);
    assert.equal((await alice.post('/email/suppressions', { email: 'not an address' })).statusCode, 400);

    const first = (await alice.get('/email/suppressions?limit=2')).json();
    assert.deepEqual(
      first.suppressions.map((s: { email: string }) => s.email),
      ['a.b@example.com', 'c.d@example.com'],
    );
    const second = (await alice.get(`/email/suppressions?limit=2&cursor=${first.nextCursor}`)).json();
    assert.deepEqual(
      second.suppressions.map((s: { email: string }) => s.email),
      ['e.f@example.com', 'zed@example.com'],
    );
    assert.equal(second.nextCursor, null);
    assert.equal((await alice.get('/email/suppressions?cursor=bm90IGEgY3Vyc29y')).statusCode, 400);
    // A cursor's address decoded with a NUL in it: PostgreSQL's text cannot hold one.
    const withNul = Buffer.from('a\u0000@example.com').toString('base64url');
    const refused = await alice.get(`/email/suppressions?cursor=${withNul}`);
    assert.equal(refused.statusCode, 400, refused.body);
    assert.deepEqual(
      refused.json().errors.map((e: { field: string }) => e.field),
      ['cursor'],
    );

    const bob = await api.client();
    assert.deepEqual((await bob.get('/email/suppressions')).json(), { suppressions: [], nextCursor: null });
    assert.equal(
      (
        await api.t.app.inject({
          method: 'DELETE',
          url: '/email/suppressions/zed@example.com',
          headers: bearer(bob.token),
        })
      ).statusCode,
      404,
    );
    const deleted = await api.t.app.inject({
      method: 'DELETE',
      url: '/email/suppressions/ZED@example.com',
      headers: bearer(alice.token),
    });
    assert.equal(deleted.statusCode, 204);
    assert.equal(
      (
        await api.t.app.inject({
          method: 'DELETE',
          url: '/email/suppressions/zed@example.com',
          headers: bearer(alice.token),
        })
      ).statusCode,
      404,
    );
    // The address is sendable again.
    await sendBatch(api, alice, buildBatch({}, { recipients: [{ to: 'zed@example.com' }] }));
    assert.equal((await sandboxEmails(alice, 'zed@example.com')).length, 1);
  });

  it(
    'schedules a batch (Scheduled until its time), cancels one that has not started (204), and refuses to cancel ' +
      'once it has (409)',
    async () => {
      const at = new Date(api.clock.now() + 3_600_000).toISOString();
      const later = await alice.post('/email/batch', buildBatch({ scheduleDateTime: at }));
      assert.equal(later.statusCode, 202);
      const kept = later.json().data.BatchId;
      const cancelled = (await alice.post('/email/batch', buildBatch({ scheduleDateTime: at }))).json().data.BatchId;
      const before = await read(alice, kept);
      assert.deepEqual([before.status, before.scheduledAt, before.totals], ['Scheduled', at, { Scheduled: 1 }]);
      const bob = await api.client();
      const del = (client: ApiClient, id: string) =>
        api.t.app.inject({ method: 'DELETE', url: `/email/batch/${id}`, headers: bearer(client.token) });
      assert.equal((await del(bob, cancelled)).statusCode, 404);
      assert.equal((await del(alice, cancelled)).statusCode, 204);
      assert.deepEqual(
        [(await read(alice, cancelled)).status, (await read(alice, cancelled)).totals],
        ['Cancelled', { Cancelled: 1 }],
      );
      await api.drain();
      assert.deepEqual(await sandboxEmails(alice), [], 'nothing before its time');
      api.clock.advance(3_600_000);
      await api.drain();
      assert.equal((await read(alice, kept)).status, 'Completed');
      assert.equal((await sandboxEmails(alice)).length, 1, 'the cancelled batch sent nothing');
      assert.equal((await del(alice, kept)).statusCode, 409);
    },
  );

  it('reads Scheduled and Cancelled in a history from the batch’s own times, and never posts them', async () => {
    const entry = (event: string, ms: number) => ({ event, at: new Date(ms).toISOString() });
    const createdAt = api.clock.now();
    const at = createdAt + 60_000;
    const body = buildBatch({ scheduleDateTime: new Date(at).toISOString(), webHookUrl: receiver.url });
    const scheduled = await alice.accept('/email/batch', body);
    const cancelled = await alice.accept('/email/batch', body);
    const immediate = await alice.accept('/email/batch', buildBatch({ webHookUrl: receiver.url }));
    api.clock.advance(1000);
    for (const batchId of [cancelled, immediate]) {
      const url = `/email/batch/${batchId}`;
      assert.equal((await api.t.app.inject({ method: 'DELETE', url, headers: bearer(alice.token) })).statusCode, 204);
    }
    const history = async (batchId: string) => (await read(alice, batchId)).recipients[0].history;
    assert.deepEqual(await history(scheduled), [entry('Scheduled', createdAt)]);
    assert.deepEqual(await history(cancelled), [entry('Scheduled', createdAt), entry('Cancelled', createdAt + 1000)]);
    assert.deepEqual(await history(immediate), [entry('Cancelled', createdAt + 1000)]);

    api.clock.advance(59_000);
    await api.drain();
    const sent = [entry('Scheduled', createdAt), entry('Processed', at), entry('Delivered', at)];
    assert.deepEqual(await history(scheduled), sent);
    const events = (await posted(alice)).map((e) => [e.batchId, e.event]);
    assert.deepEqual(events, [
      [scheduled, 'Processed'],
      [scheduled, 'Delivered'],
    ]);
  });

  it('pages GET /sandbox/email newest first with a cursor that shows another account nothing', async () => {
    const bob = await api.client();
    const recipients = ['ada@example.com', 'bob@example.com', 'cy@example.com'].map((to) => ({ to }));
    await sendBatch(api, alice, buildBatch({}, { recipients }));
    const page = async (client: ApiClient, query: string) => {
      const response = await client.get(`/sandbox/email?${query}`);
      assert.equal(response.statusCode, 200, response.body);
      return response.json() as { messages: Array<{ to: string }>; nextCursor: string | null };
    };
    const all = (await page(alice, '')).messages.map((m) => m.to);
    assert.equal(all.length, 3);
    const first = await page(alice, 'limit=2');
    assert.deepEqual(
      first.messages.map((m) => m.to),
      all.slice(0, 2),
    );
    const second = await page(alice, `limit=2&cursor=${first.nextCursor}`);
    assert.deepEqual([second.messages.map((m) => m.to), second.nextCursor], [all.slice(2), null]);
    assert.deepEqual(await page(bob, `cursor=${first.nextCursor}`), { messages: [], nextCursor: null });
    assert.equal((await alice.get('/sandbox/email?cursor=x')).statusCode, 400);
  });

  it(
    'replays an Idempotency-Key: the first response, one batch ' + 'queued; another body with the key is a 422',
    async () => {
      const post = (body: object) =>
        api.t.app.inject({
          method: 'POST',
          url: '/email/batch',
          headers: { ...bearer(alice.token), 'idempotency-key': 'spring-1' },
          payload: body,
        });
      const first = await post(buildBatch());
      assert.equal(first.statusCode, 202);
      const again = await post(buildBatch());
      assert.equal(again.statusCode, 202);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.deepEqual(again.json(), first.json());
      assert.equal((await post(buildBatch({ subject: 'Other' }))).statusCode, 422);
      await api.drain();
      assert.equal((await sandboxEmails(alice)).length, 1);
    },
  );

  it('keeps accounts apart: another account’s batch, sandbox and suppressions are not there', async () => {
    const bob = await api.client();
    const batchId = await sendBatch(api, alice, buildBatch());
    assert.equal((await bob.get(`/email/batch/${batchId}`)).statusCode, 404);
    assert.deepEqual(await sandboxEmails(bob), []);
    await bob.post('/email/suppressions', { email: 'ada@example.com' });
    await sendBatch(api, alice, buildBatch());
    assert.equal((await sandboxEmails(alice, 'ada@example.com')).length, 2, 'bob’s suppression is his alone');
    assert.equal((await alice.get(`/email/batch/${batchId}?limit=1001`)).statusCode, 400);
  });
});
