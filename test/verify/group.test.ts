import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { createAccount } from '../../src/accounts/service.ts';
import { systemClock } from '../../src/clock.ts';
import { openDatabase } from '../../src/db/database.ts';
import { isUniqueViolation } from '../../src/db/errors.ts';
import { outcomeOf } from '../../src/http/idempotency.ts';
import { sendJobKey } from '../../src/sms/accept.ts';
import {
  checkVerificationGroup,
  isPrefixRefusal,
  startVerificationGroup,
  type CheckVerification,
  type StartVerification,
} from '../../src/verify/record.ts';
import { PROCEDURE_MODULES } from '../../src/server/procedures.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

// POST /verify without an Idempotency-Key is written in groups (db/gathering.ts): each start's
// limits are counted in the group's transaction after those before it, a start they refuse is
// answered its 429 alone, and the others commit together.
forEachDatabase((dialect) => {
  let database: TestDatabase;
  let accountId: string;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
    const account = await createAccount(database.db, systemClock, {
      userName: `verify-group-${randomUUID()}@example.com`,
      password: 'correct horse battery staple',
    });
    accountId = account.id;
  });
  afterEach(() => database.close());

  const T0 = Date.UTC(2026, 10, 29, 12);
  const startOf = (to: string, now: number, overrides: Partial<StartVerification> = {}): StartVerification => {
    const sendId = randomUUID();
    return {
      id: randomUUID(),
      accountId,
      channel: 'sms',
      to,
      country: 'IN',
      prefix: to.slice(0, 6),
      prefixLimit: 10,
      codeHash: `salt.${randomUUID()}`,
      ttlMs: 600_000,
      webhookUrl: null,
      message: {
        sms: {
          sendId,
          accountId,
          draft: { kind: 'single', listIds: [], scheduledAt: null, webhookUrl: null },
          content: {
            kind: 'single',
            senderName: 'HERALD',
            body: 'sealed elsewhere',
            tags: {},
            landingPageId: null,
            shortener: null,
          },
          recipients: [{ address: to, tags: null, contactId: null }],
          now,
        },
      },
      now,
      ...overrides,
    };
  };
  const sendIdOf = (start: StartVerification) => ('sms' in start.message ? start.message.sms.sendId : '');
  const gather = (start: StartVerification) => database.gather(startVerificationGroup, start);

  it('counts each start of a group after those before it, and answers a refused one alone', async () => {
    // Five codes to one number, 31 s apart, each a group of its own: a sixth is refused.
    const fifth = T0 + 4 * 31_000;
    for (let at = T0; at <= fifth; at += 31_000) outcomeOf(await gather(startOf('919811100000', at)));
    const now = fifth + 31_000;
    const first = startOf('919811100001', now);
    const group = [
      startOf('919811100000', now + 1), // the sixth code to the number
      startOf('919822200001', now + 2),
      startOf('919822200001', now + 3), // one number twice: the second within the resend wait
      startOf('919833300001', now + 4, { prefixLimit: 1 }),
      startOf('919833300002', now + 5, { prefixLimit: 1 }), // the prefix's second
      startOf('919844400001', now + 6),
    ];
    const alone = gather(first);
    const answers = await Promise.all([alone, ...group.map(gather)]);
    assert.deepEqual(database.gathered().get('startVerificationGroup'), { groups: 7, callers: 12 }, 'five, one, six');

    const statuses = answers.map((answer) => ('refused' in answer ? answer.refused.statusCode : answer.statusCode));
    assert.deepEqual(statuses, [201, 429, 201, 429, 201, 429, 201]);
    const refusal = (i: number) => {
      const answer = answers[i];
      assert.ok('refused' in answer);
      return answer.refused;
    };
    assert.match(refusal(1).message, /5 codes went to this number/);
    assert.match(refusal(3).message, /less than 30 s ago/);
    assert.equal(refusal(3).headers['retry-after'], '30', 'as if the first of the two had committed before');
    assert.throws(() => outcomeOf(answers[5]), isPrefixRefusal, 'thrown to its caller as the AppError it was');

    const committed = [first, group[1], group[3], group[5]];
    const rows = await database.db
      .selectFrom('verifications')
      .select(['id', 'recipient', 'send_attempts'])
      .where(
        'id',
        'in',
        committed.map((start) => start.id),
      )
      .orderBy('recipient')
      .execute();
    assert.deepEqual(
      rows.map((row) => [row.recipient, Number(row.send_attempts)]),
      [
        ['919811100001', 1],
        ['919822200001', 1],
        ['919833300001', 1],
        ['919844400001', 1],
      ],
    );
    const refusedIds = [group[0], group[2], group[4]].map((start) => start.id);
    assert.equal(
      (await database.db.selectFrom('verifications').select('id').where('id', 'in', refusedIds).execute()).length,
      0,
      'a refused start wrote no verification',
    );
    const sends = await database.db
      .selectFrom('sends')
      .select('id')
      .where('id', 'in', [...committed, ...group].map(sendIdOf))
      .execute();
    assert.deepEqual(sends.map((send) => send.id).sort(), committed.map(sendIdOf).sort(), 'nor its message');
    const jobs = await database.db
      .selectFrom('jobs')
      .select('idempotency_key')
      .where(
        'idempotency_key',
        'in',
        committed.map((start) => sendJobKey(sendIdOf(start))),
      )
      .execute();
    assert.equal(jobs.length, 4, 'each committed code has its send job');
    const counted = await database.db
      .selectFrom('verification_sends')
      .select(['recipient'])
      .where('account_id', '=', accountId)
      .execute();
    const perNumber = new Map<string, number>();
    for (const { recipient } of counted) perNumber.set(recipient, (perNumber.get(recipient) ?? 0) + 1);
    assert.deepEqual(
      [...perNumber].sort(),
      [
        ['919811100000', 5],
        ['919811100001', 1],
        ['919822200001', 1],
        ['919833300001', 1],
        ['919844400001', 1],
      ],
      'a send counted for each code that went',
    );
    if (dialect === 'postgres') {
      // One transaction wrote the group's three: it did not fail and go again one at a time.
      const writers = await sql<{ xmin: string }>`select distinct xmin::text as xmin from verifications
        where id in (${sql.join([group[1], group[3], group[5]].map((start) => start.id))})`.execute(database.db);
      assert.equal(writers.rows.length, 1);
    }
  });

  it('writes a failed group again a start at a time: the others commit, the failing one gets its error', async () => {
    const taken = startOf('919855500000', T0);
    outcomeOf(await gather(taken));
    const group = [
      startOf('919855500001', T0 + 1),
      startOf('919855500002', T0 + 2, { id: taken.id }), // its verification's key is taken
      startOf('919855500000', T0 + 3), // within the resend wait of `taken`
      startOf('919855500003', T0 + 4),
    ];
    const blocker = gather(startOf('919855500009', T0));
    const settled = await Promise.allSettled([blocker, ...group.map(gather)]);
    assert.deepEqual(database.gathered().get('startVerificationGroup'), { groups: 3, callers: 6 });
    const [, ok1, broken, early, ok2] = settled;
    assert.equal(broken.status, 'rejected');
    assert.ok(isUniqueViolation(broken.reason), String(broken.reason));
    assert.ok(early.status === 'fulfilled' && 'refused' in early.value && early.value.refused.statusCode === 429);
    for (const result of [ok1, ok2]) assert.ok(result.status === 'fulfilled' && 'statusCode' in result.value);
    const recipients = await database.db
      .selectFrom('verifications')
      .select('recipient')
      .where('account_id', '=', accountId)
      .orderBy('recipient')
      .execute();
    assert.deepEqual(
      recipients.map((row) => row.recipient),
      ['919855500000', '919855500001', '919855500003', '919855500009'],
    );
    const sends = await database.db.selectFrom('sends').select('id').where('account_id', '=', accountId).execute();
    assert.equal(sends.length, 4, 'a code each, the failing start none');
  });

  it('sends again, and expires one past its end, within a group', async () => {
    const HOOK = 'https://hooks.example.com/verify';
    const ending = startOf('919866600001', T0, { ttlMs: 60_000, webhookUrl: HOOK });
    const resending = startOf('919866600002', T0, { webhookUrl: HOOK });
    outcomeOf(await gather(ending));
    outcomeOf(await gather(resending));
    const now = T0 + 61_000;
    const anew = startOf('919866600001', now);
    const again = startOf('919866600002', now, { codeHash: 'salt.again' });
    const blocker = gather(startOf('919866600003', now));
    const [, first, second] = await Promise.all([blocker, gather(anew), gather(again)]);
    assert.deepEqual(database.gathered().get('startVerificationGroup'), { groups: 4, callers: 5 });
    const body = (answer: typeof first) => outcomeOf(answer).body as { verificationId: string; sendAttempts: number };
    assert.deepEqual([body(first).verificationId, body(first).sendAttempts], [anew.id, 1], 'a new verification');
    assert.deepEqual([body(second).verificationId, body(second).sendAttempts], [resending.id, 2], 'the same one');
    const rows = await database.db
      .selectFrom('verifications')
      .select(['id', 'status', 'code_hash', 'send_attempts', 'ended_at'])
      .where('id', 'in', [ending.id, resending.id, anew.id])
      .orderBy('created_at')
      .orderBy('recipient')
      .execute();
    assert.deepEqual(
      rows.map((row) => [row.id, row.status, Number(row.send_attempts)]),
      [
        [ending.id, 'expired', 1],
        [resending.id, 'pending', 2],
        [anew.id, 'pending', 1],
      ],
    );
    assert.equal(rows[1].code_hash, 'salt.again', 'the new code replaces the old');
    assert.deepEqual(await postedStatuses(), [[ending.id, 'expired']]);
  });

  it('writes a verification made and sent again within one group once, as the group leaves it', async () => {
    const made = startOf('919877700001', T0);
    const again = startOf('919877700001', T0 + 31_000, { codeHash: 'salt.again' });
    const blocker = gather(startOf('919877700002', T0));
    const [, first, second] = await Promise.all([blocker, gather(made), gather(again)]);
    assert.deepEqual(database.gathered().get('startVerificationGroup'), { groups: 2, callers: 3 });
    const body = (answer: typeof first) => outcomeOf(answer).body as { verificationId: string; sendAttempts: number };
    assert.deepEqual([body(first).verificationId, body(first).sendAttempts], [made.id, 1]);
    assert.deepEqual([body(second).verificationId, body(second).sendAttempts], [made.id, 2], 'the same one');
    const rows = await database.db
      .selectFrom('verifications')
      .select(['id', 'code_hash', 'send_attempts', 'last_sent_at'])
      .where('recipient', '=', '919877700001')
      .execute();
    assert.deepEqual(
      rows.map((row) => [row.id, row.code_hash, Number(row.send_attempts), Number(row.last_sent_at)]),
      [[made.id, 'salt.again', 2, T0 + 31_000]],
    );
    const sends = await database.db
      .selectFrom('verification_sends')
      .select('at')
      .where('recipient', '=', '919877700001')
      .orderBy('at')
      .execute();
    assert.deepEqual(
      sends.map((send) => Number(send.at)),
      [T0, T0 + 31_000],
    );
  });

  /** Each verify.status event waiting to be posted: its verification and status. */
  const postedStatuses = async () =>
    (await database.db.selectFrom('webhook_events').select('events').where('type', '=', 'verify.status').execute())
      .flatMap((row) => JSON.parse(row.events) as Array<{ verificationId: string; status: string }>)
      .map((event) => [event.verificationId, event.status])
      .sort();

  // SQLite has no such case: one process writes it, a transaction at a time.
  const onPostgres = dialect === 'postgres' ? it : () => {};
  onPostgres('never deadlocks two processes checking the same verifications the other way round', async () => {
    // Each process's group approves one verification and takes an attempt from the other: in
    // two statements, so without the rows locked in one order first the two wait on each other.
    const second = openDatabase(database.url, { procedures: PROCEDURE_MODULES });
    try {
      for (let round = 0; round < 40; round++) {
        const [a, b] = [`91987771${String(round).padStart(4, '0')}`, `91987772${String(round).padStart(4, '0')}`].map(
          (to) => startOf(to, T0, { prefix: '' }),
        );
        for (const start of [a, b]) outcomeOf(await database.gather(startVerificationGroup, start));
        const check = (start: StartVerification, matched: boolean): CheckVerification => ({
          accountId,
          id: start.id,
          codeHash: start.codeHash,
          matched,
          now: T0 + 1_000,
        });
        const answers = await Promise.all([
          database.call(checkVerificationGroup, [check(a, true), check(b, false)]),
          second.call(checkVerificationGroup, [check(b, true), check(a, false)]),
        ]);
        assert.equal(answers.flat().length, 4);
      }
    } finally {
      await second.close();
    }
  });

  it('checks a group in turn: each check of one verification after the one before it', async () => {
    const HOOK = 'https://hooks.example.com/verify';
    const [once, often, ended, other] = ['919877700001', '919877700002', '919877700003', '919877700004'].map((to) =>
      startOf(to, T0, { webhookUrl: HOOK, ttlMs: to.endsWith('3') ? 60_000 : 600_000 }),
    );
    for (const start of [once, often, ended, other]) outcomeOf(await database.gather(startVerificationGroup, start));
    const now = T0 + 61_000;
    const checkOf = (start: StartVerification, matched: boolean): CheckVerification => ({
      accountId,
      id: start.id,
      codeHash: start.codeHash,
      matched,
      now,
    });
    const checks = [
      checkOf(once, false),
      checkOf(once, true),
      checkOf(once, false),
      ...Array.from({ length: 6 }, () => checkOf(often, false)),
      checkOf(ended, true),
      { ...checkOf(other, false), accountId: randomUUID() },
    ];
    const blocker = database.gather(checkVerificationGroup, checkOf(other, false));
    const [, ...answers] = await Promise.all([
      blocker,
      ...checks.map((c) => database.gather(checkVerificationGroup, c)),
    ]);
    assert.deepEqual(database.gathered().get('checkVerificationGroup'), { groups: 2, callers: 12 });
    assert.deepEqual(
      answers.map((answer) => (answer ? `${answer.status} ${answer.attemptsLeft}` : null)),
      [
        'pending 4',
        'approved 4',
        null,
        'pending 4',
        'pending 3',
        'pending 2',
        'pending 1',
        'failed 0',
        null,
        'expired 5',
        null,
      ],
    );
    const rows = await database.db
      .selectFrom('verifications')
      .select(['id', 'status', 'attempts_left'])
      .where('id', 'in', [once.id, often.id, ended.id, other.id])
      .execute();
    const state = new Map(rows.map((row) => [row.id, [row.status, Number(row.attempts_left)]]));
    assert.deepEqual(
      [once, often, ended, other].map((start) => state.get(start.id)),
      [
        ['approved', 4],
        ['failed', 0],
        ['expired', 5],
        ['pending', 4],
      ],
      "another account's check of a verification touches nothing",
    );
    assert.deepEqual(
      await postedStatuses(),
      [
        [once.id, 'approved'],
        [often.id, 'failed'],
        [ended.id, 'expired'],
      ].sort(),
      'each ending posted once',
    );
  });
});
