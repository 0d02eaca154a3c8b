import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { sweep } from '../../src/messaging/retention.ts';
import { scheduleRecurring } from '../../src/queue/recurring.ts';
import { VERIFY_EXPIRY_KIND } from '../../src/verify/expiry.ts';
import { expireVerifications } from '../../src/verify/record.ts';
import { generateKey } from '../../src/sealed.ts';
import { VERIFY_PURGES } from '../../src/verify/retention.ts';
import { startTestApp } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { waitForLockWait } from '../support/wait.ts';
import { forEachDatabase } from '../support/databases.ts';
import { foundInStorage, pgDump } from '../support/storage.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';

// Verify (ARCHITECTURE.md, "Verify (one-time passcodes)"): src/verify/, over the sandbox SMSC.

const NUMBER = '919812345678';
const TODAY = '2026-11-22';

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let receiver: Receiver;
  let logs: string[];
  beforeEach(async () => {
    logs = [];
    const logger = { level: 'trace', stream: { write: (line: string) => void logs.push(line) } };
    api = await startApiTest(dialect, { clock: new ManualClock(Date.UTC(2026, 10, 22, 12)), logger });
    alice = await api.client();
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await receiver.close();
    await api.close();
  });

  const start = (client: ApiClient, body: object = {}) =>
    client.post('/verify', { to: NUMBER, webHookUrl: receiver.url, ...body });
  const check = (client: ApiClient, id: string, code: string) => client.post(`/verify/${id}/check`, { code });
  const patchAccount = (client: ApiClient, payload: object) =>
    api.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: { authorization: `Bearer ${client.token}` },
      payload,
    });
  /** The newest code the sandbox took for `to`: its read opens Verify's codes for their account. */
  const sentCode = async (client: ApiClient, to = NUMBER) => {
    await api.drain();
    const messages = (await client.get(`/sandbox/sms?recipient=${to}`)).json().messages as Array<{ text: string }>;
    assert.ok(messages.length > 0, 'the code was sent');
    const match = /is (\d+)$/.exec(messages[0].text);
    assert.ok(match, `the text holds the code: ${messages[0].text}`);
    return match[1];
  };
  const wrong = (code: string) => String((Number(code) + 1) % 10 ** code.length).padStart(code.length, '0');
  const posted = () => receiver.received.flatMap((r) => JSON.parse(r.body).data as Array<{ status: string }>);

  it('sends a code by SMS, approves it once, and posts verify.status', async () => {
    const started = await start(alice);
    assert.equal(started.statusCode, 201, started.body);
    const body = started.json();
    assert.deepEqual(Object.keys(body).sort(), [
      'channel',
      'expiresAt',
      'sendAttempts',
      'status',
      'to',
      'verificationId',
    ]);
    assert.deepEqual([body.to, body.channel, body.status, body.sendAttempts], [NUMBER, 'sms', 'pending', 1]);
    assert.equal(body.expiresAt, new Date(api.clock.now() + 600_000).toISOString());
    const code = await sentCode(alice);
    assert.match(code, /^\d{6}$/);

    const missed = await check(alice, body.verificationId, wrong(code));
    assert.deepEqual(missed.json(), { verificationId: body.verificationId, status: 'pending', attemptsLeft: 4 });
    const approved = await check(alice, body.verificationId, code);
    assert.deepEqual(approved.json(), { verificationId: body.verificationId, status: 'approved', attemptsLeft: 4 });
    assert.equal((await check(alice, body.verificationId, code)).statusCode, 404, 'a code works once');
    const read = (await alice.get(`/verify/${body.verificationId}`)).json();
    assert.equal(read.status, 'approved');

    await api.drain();
    api.clock.advance(2000);
    await api.drain();
    assert.deepEqual(
      receiver.received.map((r) => JSON.parse(r.body).type),
      ['verify.status'],
      'one post, of verify.status only: the code message posts no sms.status',
    );
    assert.deepEqual(
      posted().map(({ status }) => status),
      ['approved'],
    );
  });

  it('fails a verification at its fifth wrong code, and answers 404 after', async () => {
    const id = (await start(alice)).json().verificationId;
    const code = await sentCode(alice);
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push((await check(alice, id, wrong(code))).json());
    assert.deepEqual(
      answers.map((a) => [a.status, a.attemptsLeft]),
      [
        ['pending', 4],
        ['pending', 3],
        ['pending', 2],
        ['pending', 1],
        ['failed', 0],
      ],
    );
    assert.equal((await check(alice, id, code)).statusCode, 404, 'the right code after the fifth wrong one');
  });

  it('takes one attempt a check when checks come at once, and approves a code once', async () => {
    const id = (await start(alice)).json().verificationId;
    const code = await sentCode(alice);
    const wrongs = await Promise.all(Array.from({ length: 8 }, () => check(alice, id, wrong(code))));
    assert.deepEqual(
      wrongs.map((r) => (r.statusCode === 200 ? `${r.json().status} ${r.json().attemptsLeft}` : r.statusCode)).sort(),
      [404, 404, 404, 'failed 0', 'pending 1', 'pending 2', 'pending 3', 'pending 4'],
    );
    const grouped = api.t.ctx.database.gathered().get('checkVerificationGroup');
    assert.ok(grouped && grouped.groups < grouped.callers, `checks shared a transaction: ${JSON.stringify(grouped)}`);
    const other = (await start(alice, { to: '919812345679' })).json().verificationId;
    const otherCode = await sentCode(alice, '919812345679');
    const rights = await Promise.all(Array.from({ length: 3 }, () => check(alice, other, otherCode)));
    assert.deepEqual(rights.map((r) => (r.statusCode === 200 ? r.json().status : r.statusCode)).sort(), [
      404,
      404,
      'approved',
    ]);
    await api.drain();
    api.clock.advance(2000);
    await api.drain();
    assert.deepEqual(
      posted()
        .map(({ status }) => status)
        .sort(),
      ['approved', 'failed'],
      'each posted once',
    );
  });

  it('answers a check sent again with its Idempotency-Key as the first time, and takes no second attempt', async () => {
    const id = (await start(alice)).json().verificationId;
    const code = await sentCode(alice);
    const keyed = (key: string, payload: object) =>
      api.t.app.inject({
        method: 'POST',
        url: `/verify/${id}/check`,
        headers: { authorization: `Bearer ${alice.token}`, 'idempotency-key': key },
        payload,
      });
    for (let i = 0; i < 2; i++) assert.equal((await keyed('wrong', { code: wrong(code) })).json().attemptsLeft, 4);
    const approved = await keyed('right', { code });
    assert.deepEqual(approved.json(), { verificationId: id, status: 'approved', attemptsLeft: 4 });
    const again = await keyed('right', { code });
    assert.equal(again.statusCode, 200, again.body);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(again.json(), approved.json(), 'the approval, not a 404, for the check whose answer was lost');
  });

  it('answers expired after the end, and the sweep posts expired', async () => {
    const id = (await start(alice, { ttlSeconds: 60 })).json().verificationId;
    const code = await sentCode(alice);
    api.clock.advance(61_000);
    assert.deepEqual((await check(alice, id, code)).json(), { verificationId: id, status: 'expired', attemptsLeft: 5 });
    const other = (await start(alice, { to: '919812345679', ttlSeconds: 60 })).json().verificationId;
    api.clock.advance(61_000);
    // The sweep is a standing job: each worker queues it as it starts (this one is drained, not started).
    await scheduleRecurring(api.t.ctx.db, VERIFY_EXPIRY_KIND, api.clock.now());
    await api.drain();
    const stored = await api.t.ctx.db
      .selectFrom('verifications')
      .select('status')
      .where('id', '=', other)
      .executeTakeFirst();
    assert.equal(stored?.status, 'expired', 'the sweep wrote it');
    api.clock.advance(2000);
    await api.drain();
    assert.equal((await alice.get(`/verify/${other}`)).json().status, 'expired');
    assert.deepEqual(
      posted()
        .map(({ status }) => status)
        .sort(),
      ['expired', 'expired'],
    );
  });

  it('leaves pending a verification a resend gives a new end while the sweep expires it', async () => {
    const id = (await start(alice, { ttlSeconds: 60 })).json().verificationId;
    api.clock.advance(61_000);
    // A resend's transaction, the new end written and not yet committed as the sweep reads.
    const committing = Promise.withResolvers<void>();
    const written = Promise.withResolvers<void>();
    const resend = api.t.ctx.db.transaction().execute(async (trx) => {
      await trx
        .updateTable('verifications')
        .set({ expires_at: api.clock.now() + 60_000 })
        .where('id', '=', id)
        .execute();
      written.resolve();
      await committing.promise;
    });
    await written.promise;
    let settled = false;
    const sweeping = api.t.ctx.database
      .call(expireVerifications, { now: api.clock.now() })
      .finally(() => (settled = true));
    if (dialect === 'postgres') await waitForLockWait(api.t.ctx.db, 'the sweep to wait for the resend', () => settled);
    committing.resolve();
    await resend;
    await sweeping;
    assert.equal((await alice.get(`/verify/${id}`)).json().status, 'pending');
    await api.drain();
    assert.deepEqual(posted(), []);
  });

  it('cancels a pending verification: its code no longer checks', async () => {
    const id = (await start(alice)).json().verificationId;
    const code = await sentCode(alice);
    const cancelled = await alice.post(`/verify/${id}/cancel`, {});
    assert.equal(cancelled.statusCode, 200, cancelled.body);
    assert.equal(cancelled.json().status, 'cancelled');
    assert.equal((await check(alice, id, code)).statusCode, 404);
  });

  it('makes a new verification when the one it would send again is approved meanwhile', async () => {
    const id = (await start(alice)).json().verificationId;
    api.clock.advance(31_000);
    const before = await api.t.ctx.db
      .selectFrom('verifications')
      .select(['code_hash', 'send_attempts'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    // A check approving it, its transaction not yet committed as the resend starts.
    const approving = Promise.withResolvers<void>();
    const approval = api.t.ctx.db.transaction().execute(async (trx) => {
      await trx.updateTable('verifications').set({ status: 'approved' }).where('id', '=', id).execute();
      await approving.promise;
    });
    let settled = false;
    const again = start(alice).finally(() => (settled = true));
    if (dialect === 'postgres') await waitForLockWait(api.t.ctx.db, 'the start to wait for the check', () => settled);
    approving.resolve();
    await approval;
    const response = await again;
    assert.equal(response.statusCode, 201, response.body);
    assert.notEqual(response.json().verificationId, id, 'a new verification');
    assert.deepEqual(
      await api.t.ctx.db
        .selectFrom('verifications')
        .select(['code_hash', 'send_attempts'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow(),
      before,
      'the approved one untouched',
    );
  });

  it('resends within 30 s only with a 429, then the same verification: a new code, its checks kept', async () => {
    const id = (await start(alice)).json().verificationId;
    const first = await sentCode(alice);
    await check(alice, id, wrong(first));
    api.clock.advance(10_000);
    const early = await start(alice);
    assert.equal(early.statusCode, 429);
    assert.equal(early.headers['retry-after'], '20');
    api.clock.advance(20_000);
    const again = await start(alice);
    assert.equal(again.statusCode, 201, again.body);
    assert.deepEqual([again.json().verificationId, again.json().sendAttempts], [id, 2]);
    const second = await sentCode(alice);
    if (second !== first) {
      const old = await check(alice, id, first);
      assert.deepEqual([old.json().status, old.json().attemptsLeft], ['pending', 3], 'the old code is void');
    }
    const approved = (await check(alice, id, second)).json();
    assert.equal(approved.status, 'approved');
  });

  it('refuses a sixth code to one number within 10 minutes', async () => {
    for (let i = 0; i < 5; i++) {
      const sent = await start(alice);
      assert.equal(sent.statusCode, 201, `send ${i + 1}: ${sent.body}`);
      api.clock.advance(31_000);
    }
    const sixth = await start(alice);
    assert.equal(sixth.statusCode, 429, sixth.body);
    assert.ok(Number(sixth.headers['retry-after']) > 0);
  });

  it('answers a burst of starts as if one after the other: the refused get their 429, the rest send', async () => {
    for (let i = 0; i < 5; i++) {
      assert.equal((await start(alice)).statusCode, 201);
      api.clock.advance(31_000);
    }
    const twice = '919812300002';
    const fresh = ['919812300001', twice, twice, '919812300003', '919812300004', '919812300005'];
    const burst = await Promise.all([start(alice), ...fresh.map((to) => start(alice, { to }))]);
    assert.deepEqual(
      burst.map((r) => r.statusCode),
      [429, 201, ...(burst[2].statusCode === 201 ? [201, 429] : [429, 201]), 201, 201, 201],
      burst.map((r) => r.body).join('\n'),
    );
    assert.match(burst[0].json().message, /5 codes went to this number/);
    const again = burst[2].statusCode === 429 ? burst[2] : burst[3];
    assert.match(again.json().message, /less than 30 s ago/);
    const grouped = api.t.ctx.database.gathered().get('startVerificationGroup');
    assert.ok(grouped && grouped.groups < grouped.callers, `some starts shared a group: ${JSON.stringify(grouped)}`);

    await api.drain();
    const sent = (to: string) => alice.get(`/sandbox/sms?recipient=${to}`).then((r) => r.json().messages.length);
    assert.equal(await sent(NUMBER), 5, 'the sixth code did not go');
    assert.deepEqual(await Promise.all(fresh.map(sent)), [1, 1, 1, 1, 1, 1], 'one code to each fresh number');
    const started = (await alice.get(`/verify/stats?from=${TODAY}&to=${TODAY}`)).json().started;
    assert.equal(started, 6);
    const code = await sentCode(alice, twice);
    const id = (burst[2].statusCode === 201 ? burst[2] : burst[3]).json().verificationId;
    assert.equal((await check(alice, id, code)).json().status, 'approved', 'the code that went is the one kept');
  });

  it('changes only the Verify fields given, whatever another API process has cached', async () => {
    const other = await startTestApp(dialect, { database: api.t.database, clock: api.clock });
    try {
      const inOther = (method: 'GET' | 'PATCH', payload?: object) =>
        other.app.inject({ method, url: '/account', headers: { authorization: `Bearer ${alice.token}` }, payload });
      assert.equal((await inOther('GET')).statusCode, 200, 'the other process holds the account read now');
      assert.equal((await patchAccount(alice, { verify: { allowedCountries: ['GB'] } })).statusCode, 200);
      const patched = await inOther('PATCH', { verify: { prefixLimit: 5 } });
      assert.deepEqual(patched.json().verify, { allowedCountries: ['GB'], prefixLimit: 5 });
      assert.deepEqual((await alice.get('/account')).json().verify, { allowedCountries: ['GB'], prefixLimit: 5 });
    } finally {
      await other.app.close();
    }
  });

  it('refuses numbers outside allowedCountries (422) and past prefixLimit (429), counted as blocked', async () => {
    const patched = await patchAccount(alice, { verify: { allowedCountries: ['IN'], prefixLimit: 2 } });
    assert.equal(patched.statusCode, 200, patched.body);
    assert.deepEqual(patched.json().verify, { allowedCountries: ['IN'], prefixLimit: 2 });
    assert.deepEqual((await alice.get('/account')).json().verify, { allowedCountries: ['IN'], prefixLimit: 2 });

    const british = await start(alice, { to: '447400123456' });
    assert.equal(british.statusCode, 422, british.body);
    assert.deepEqual(
      british.json().errors.map((e: { field: string }) => e.field),
      ['to'],
    );
    assert.equal((await start(alice, { to: '919812300001' })).statusCode, 201);
    assert.equal((await start(alice, { to: '919812300002' })).statusCode, 201);
    const third = await start(alice, { to: '919812300003' });
    assert.equal(third.statusCode, 429, third.body);
    assert.match(third.json().errors[0].message, /\+919812/);
    assert.equal((await start(alice, { to: '919912300003' })).statusCode, 201, 'another prefix');

    const stats = (await alice.get(`/verify/stats?from=${TODAY}&to=${TODAY}`)).json();
    assert.deepEqual([stats.started, stats.blocked, stats.blockedBy], [3, 2, { country: 1, prefix: 1 }]);
    const metrics = (await api.t.app.inject({ method: 'GET', url: '/metrics' })).body;
    assert.match(metrics, /herald_verify_blocked_total\{reason="country"\} 1\n/);
    assert.match(metrics, /herald_verify_blocked_total\{reason="prefix"\} 1\n/);
    assert.match(metrics, /herald_verify_sends_total\{channel="sms"\} 3\n/);
    const bad = await patchAccount(alice, { verify: { allowedCountries: ['XX'] } });
    assert.equal(bad.statusCode, 400, bad.body);
  });

  it('replays a start with its Idempotency-Key after allowedCountries narrowed, uncounted as blocked', async () => {
    const keyed = () =>
      api.t.app.inject({
        method: 'POST',
        url: '/verify',
        headers: { authorization: `Bearer ${alice.token}`, 'idempotency-key': 'start-1' },
        payload: { to: '447400123456', webHookUrl: receiver.url },
      });
    const first = await keyed();
    assert.equal(first.statusCode, 201, first.body);
    const patched = await patchAccount(alice, { verify: { allowedCountries: ['IN'] } });
    assert.equal(patched.statusCode, 200, patched.body);
    const again = await keyed();
    assert.equal(again.statusCode, 201, again.body);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.json().verificationId, first.json().verificationId);
    assert.equal((await alice.get(`/verify/stats?from=${TODAY}&to=${TODAY}`)).json().blocked, 0);
  });

  it('honours a STOP and ignores the opt-in: a login code is not marketing', async () => {
    await alice.upsert([{ mobileCountryCode: '91', mobileNumber: '9812345678', mobileOptIn: false }]);
    assert.equal((await start(alice)).statusCode, 201, 'a contact without the opt-in gets its code');
    const suppressed = await alice.post('/sms/suppressions', { number: '919812399999' });
    assert.equal(suppressed.statusCode, 201, suppressed.body);
    const stopped = await start(alice, { to: '919812399999' });
    assert.equal(stopped.statusCode, 422, stopped.body);
    assert.deepEqual(
      stopped.json().errors.map((e: { field: string }) => e.field),
      ['to'],
    );
  });

  it("keeps one account's verifications from another", async () => {
    const id = (await start(alice)).json().verificationId;
    const code = await sentCode(alice);
    const bob = await api.client();
    assert.equal((await bob.get(`/verify/${id}`)).statusCode, 404);
    assert.equal((await check(bob, id, code)).statusCode, 404);
    assert.equal((await bob.post(`/verify/${id}/cancel`, {})).statusCode, 404);
    assert.deepEqual((await bob.get('/sandbox/sms')).json().messages, []);
    assert.equal((await bob.get(`/verify/stats?from=${TODAY}&to=${TODAY}`)).json().started, 0);
    assert.equal((await alice.get(`/verify/${id}`)).json().status, 'pending', 'nor did its check touch it');
  });

  it('keeps the code out of the database, the logs, the webhooks and every read but the sandbox', async () => {
    const template = 'Quokka login code: [code]';
    const started = await start(alice, { template, codeLength: 10 });
    const id = started.json().verificationId;
    await api.drain();
    const text = (await alice.get(`/sandbox/sms?recipient=${NUMBER}`)).json().messages[0].text as string;
    const code = text.slice('Quokka login code: '.length);
    assert.match(code, /^\d{10}$/);
    const reads = [
      started.body,
      (await alice.get(`/verify/${id}`)).body,
      (await alice.get('/sms')).body,
      ...(await Promise.all(
        (
          await alice.get('/sms')
        )
          .json()
          .sends.map(async (s: { queueId: string }) => (await alice.get(`/sms/${s.queueId}`)).body),
      )),
    ];
    assert.ok(
      reads.every((read) => !read.includes(code)),
      'no read but the sandbox shows the code',
    );
    assert.equal((await check(alice, id, code)).json().status, 'approved');
    await api.drain();
    api.clock.advance(2000);
    await api.drain();
    assert.ok(receiver.received.length > 0);
    assert.ok(
      receiver.received.every((r) => !r.body.includes(code)),
      'nor does a webhook',
    );
    assert.ok(!logs.join('').includes(code), 'nor a log');
    const found = await foundInStorage(api, dialect, [code, 'Quokka login code']);
    assert.deepEqual(found, { [code]: [], 'Quokka login code': [] }, 'the code is in clear nowhere in the database');
    if (dialect === 'postgres') {
      const dump = await pgDump(api.t.database.url);
      assert.ok(dump.includes(NUMBER), 'the dump holds the data');
      assert.ok(!dump.includes(code) && !dump.includes('Quokka login code'), 'nor in a pg_dump');
    }
  });

  it('keeps its counts in the stats after retention purges the verifications', async () => {
    const id = (await start(alice)).json().verificationId;
    await check(alice, id, await sentCode(alice));
    await start(alice, { to: '447400123456' });
    const before = (await alice.get(`/verify/stats?from=${TODAY}&to=${TODAY}`)).json();
    assert.deepEqual(before, {
      started: 2,
      approved: 1,
      failed: 0,
      expired: 0,
      blocked: 0,
      blockedBy: { country: 0, prefix: 0 },
      conversionRate: 0.5,
      byCountry: [
        { country: 'GB', started: 1, approved: 0 },
        { country: 'IN', started: 1, approved: 1 },
      ],
    });
    api.clock.advance(31 * 86_400_000);
    const report = await sweep(api.t.ctx.database, api.clock.now(), 30, { channelPurges: VERIFY_PURGES });
    assert.equal(report.channels.verifications, 2);
    assert.equal(await api.t.ctx.db.selectFrom('verifications').select('id').executeTakeFirst(), undefined);
    // A month on, the access token has ended: a new one.
    const token = await api.t.tokenFor(alice.account);
    const stats = await api.t.app.inject({
      method: 'GET',
      url: `/verify/stats?from=${TODAY}&to=${TODAY}`,
      headers: { authorization: `Bearer ${token}` },
    });
    const after = stats.json();
    assert.deepEqual(after, { ...before, expired: 1 }, 'the pending one ended expired long ago');
  });

  it('counts a purged attempt once when two retention sweeps run at once (a lapsed lease’s)', async () => {
    const first = api.clock.now() - 120 * 86_400_000;
    const attempts = Array.from({ length: 200 }, (_, i) => ({
      account_id: alice.account.row.id,
      reason: 'country' as const,
      country: 'GB',
      at: first + i * 60_000,
    }));
    await api.t.ctx.db.insertInto('verify_blocked').values(attempts).execute();
    const run = () => sweep(api.t.ctx.database, api.clock.now(), 30, { channelPurges: VERIFY_PURGES });
    const reports = await Promise.all([run(), run()]);
    const rollup = await api.t.ctx.db
      .selectFrom('verify_rollup')
      .select((eb) => eb.fn.sum<number>('blocked_country').as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(rollup.n), 200);
    assert.equal(reports[0].channels.verifyBlocked + reports[1].channels.verifyBlocked, 200, 'each deleted once');
  });

  it('purges a backlog of blocked attempts spread over more buckets than a statement binds', async () => {
    // 8,000 attempts a quarter-hour apart, each its own rollup row: 72,000 values in one insert.
    const quarterHour = 15 * 60_000;
    const first = api.clock.now() - 120 * 86_400_000;
    const attempts = Array.from({ length: 8_000 }, (_, i) => ({
      account_id: alice.account.row.id,
      reason: i % 2 ? ('country' as const) : ('prefix' as const),
      country: 'GB',
      at: first + i * quarterHour,
    }));
    for (let i = 0; i < attempts.length; i += 1_000) {
      await api.t.ctx.db
        .insertInto('verify_blocked')
        .values(attempts.slice(i, i + 1_000))
        .execute();
    }
    const report = await sweep(api.t.ctx.database, api.clock.now(), 30, { channelPurges: VERIFY_PURGES });
    assert.equal(report.channels.verifyBlocked, 8_000);
    const rollup = await api.t.ctx.db
      .selectFrom('verify_rollup')
      .select([(eb) => eb.fn.countAll<number>().as('rows'), (eb) => eb.fn.sum<number>('blocked_country').as('country')])
      .select((eb) => eb.fn.sum<number>('blocked_prefix').as('prefix'))
      .executeTakeFirstOrThrow();
    assert.deepEqual([Number(rollup.rows), Number(rollup.country), Number(rollup.prefix)], [8_000, 4_000, 4_000]);
  });

  it('still checks a pending code after ENCRYPTION_KEY is replaced', async () => {
    await api.close();
    const old = generateKey();
    const hex = (key: ReturnType<typeof generateKey>) => key.export().toString('hex');
    const first = await startApiTest(dialect, { env: { ENCRYPTION_KEY: hex(old) } });
    const client = await first.client();
    const id = (await client.post('/verify', { to: NUMBER })).json().verificationId;
    await first.drain();
    const text = (await client.get('/sandbox/sms')).json().messages[0].text as string;
    const code = text.slice(-6);
    const database = first.t.database;
    await first.t.app.close();
    const replaced = await startTestApp(dialect, {
      database,
      env: { ENCRYPTION_KEY: hex(generateKey()), ENCRYPTION_KEY_PREVIOUS: hex(old) },
    });
    try {
      const token = await replaced.tokenFor(client.account);
      const checked = await replaced.app.inject({
        method: 'POST',
        url: `/verify/${id}/check`,
        headers: { authorization: `Bearer ${token}` },
        payload: { code },
      });
      assert.equal(checked.json().status, 'approved', checked.body);
    } finally {
      await replaced.close();
      await first.close();
    }
    api = await startApiTest(dialect);
  });
});
