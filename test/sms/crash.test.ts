import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import {
  accepted,
  accessToken,
  crashSetUp,
  killedAfter,
  servedUntilCompleted,
  tally,
  type CrashSetup,
} from '../support/crash.ts';
import { start } from '../cli/support.ts';
import { startSmsc } from '../../src/sim/smsc.ts';
import { ManualClock } from '../../src/clock.ts';
import { loadEncryptionKey } from '../../src/messaging/encryption-key.ts';
import { keyFromHex } from '../../src/sealed.ts';
import { addConnection } from '../../src/sms/routing/connections.ts';
import { replaceRoutes } from '../../src/sms/routing/table.ts';
import { waitFor } from '../support/wait.ts';

const LIST = 1200; // more than two pages of 500
/** The SMPP crash's batch, and SMS_TRANSPORT's defaults for smpp:// that bound what goes twice. */
const SMPP_LIST = 5000;
const SMPP_BINDS = 2;
const SMPP_WINDOW = 50;

// A worker killed (SIGKILL, a real process) at a named step of a send, then a serve started
// again on the same database: what every recipient got.
forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(() => database.close());

  const setUp = (size = LIST) =>
    crashSetUp(database, dialect, size, (id) => ({
      email: null,
      mobile: String(919_800_000_000 + id),
      mobile_country_code: '91',
      mobile_opt_in: true,
      email_opt_in: false,
    }));

  /**
   * Starts a serve paused at `step`, posts the request, and kills the serve (SIGKILL) once it has
   * paused there; answers the QueueId.
   */
  const killedAt = (step: string, setup: CrashSetup, path: string, body: object): Promise<string> =>
    killedAfter({ ...setup.env, HERALD_TEST_PAUSE_AT: step }, async (doomed) => {
      const queueId = (await accepted(setup, path, body)).data.QueueId;
      await doomed.logged(`herald paused at ${step}`);
      return queueId;
    });

  /** Serves again until the send is Completed; answers how many times the sandbox took each recipient. */
  async function resumed(env: Record<string, string>, queueId: string): Promise<Map<string, number>> {
    await servedUntilCompleted(database, env, queueId);
    return tally(
      (await database.db.selectFrom('sandbox_sms').select(['recipient']).where('send_id', '=', queueId).execute()).map(
        (r) => r.recipient,
      ),
    );
  }

  // Each test below starts two serves (a process each, compiled at start): beside other test files and
  // busy loops (load 15-19) the four of 1,200 recipients took 57-67 s (past the minute they had, on
  // both databases) and then 104-109 s, the SMPP ones of 5,000 up to 113 s of their two minutes; three
  // minutes each. What they assert is counted, not timed: a hang still fails.
  it('resumes a send killed mid-expansion: every recipient in the sandbox exactly once', {
    timeout: 180_000,
  }, async () => {
    const setup = await setUp();
    const queueId = await killedAt('sms.expand', setup, '/sms/batch', {
      listId: [setup.listId],
      recipients: [{ mobileNo: '919800000001' }, { mobileNo: '919700000001' }],
      senderName: 'HERALD',
      body: 'sale',
    });
    assert.equal(
      Number(
        (
          await database.db
            .selectFrom('send_recipients')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('send_id', '=', queueId)
            .executeTakeFirstOrThrow()
        ).n,
      ),
      2,
      'only the request’s recipients: the expansion died with its transaction',
    );

    const counts = await resumed(setup.env, queueId);
    assert.equal(
      counts.size,
      LIST + 1,
      'every recipient: the list (one number shared with the request) and the other request recipient',
    );
    assert.deepEqual([...new Set(counts.values())], [1], 'each exactly once');
  });

  it('sends again only the page whose submit was not recorded when its worker was killed: the documented bound', {
    timeout: 180_000,
  }, async () => {
    const setup = await setUp();
    const queueId = await killedAt('sms.submitted', setup, '/sms/batch', {
      listId: [setup.listId],
      senderName: 'HERALD',
      body: 'sale',
    });
    const counts = await resumed(setup.env, queueId);
    assert.equal(counts.size, LIST, 'every recipient');
    const twice = [...counts].filter(([, n]) => n > 1);
    assert.equal(twice.length, 500, 'the first page, submitted before the kill and not recorded, went twice; no other');
    assert.deepEqual([...new Set(counts.values())].sort(), [1, 2]);
    const read = await database.db
      .selectFrom('send_recipients')
      .select('status')
      .where('send_id', '=', queueId)
      .execute();
    assert.deepEqual(
      [...new Set(read.map((r) => r.status))],
      ['Delivered'],
      'each recipient recorded once, at its last status',
    );
  });

  it('keeps every /sms/single of a concurrent burst from the moment of its 202: killed right after the answers, ' +
    'each is stored, and sent once restarted', {
    timeout: 180_000,
  }, async () => {
    const setup = await setUp(1);
    const burst = Array.from({ length: 60 }, (_, i) => String(919_700_000_000 + i));
    const queueIds = await killedAfter(setup.env, async () => {
      const token = await accessToken(setup);
      const answers = await Promise.all(
        burst.map((recipient) =>
          accepted(setup, '/sms/single', { recipient, senderName: 'HERALD', body: 'Your code is 482913' }, token),
        ),
      );
      const metrics = await (await fetch(`${setup.base}/metrics`)).text();
      const counted = (name: string) =>
        Number(metrics.match(new RegExp(`^${name}\\{procedure="recordSmsSingleGroup"\\} (\\d+)$`, 'm'))?.[1]);
      assert.ok(
        counted('herald_db_grouped_writes_total') > counted('herald_db_write_groups_total'),
        'the burst was written in groups',
      );
      return answers.map((answer) => answer.data.QueueId);
    });
    const stored = await database.db.selectFrom('sends').select('id').where('id', 'in', queueIds).execute();
    assert.equal(stored.length, burst.length, 'every answered request survived the kill');

    const restarted = await start(['serve'], setup.env);
    try {
      await waitFor(
        'every passcode Completed after the restart',
        async () => {
          const done = await database.db
            .selectFrom('sends')
            .select('id')
            .where('id', 'in', queueIds)
            .where('status', '=', 'Completed')
            .execute();
          return done.length === burst.length || undefined;
        },
        { timeoutMs: 40_000 },
      );
    } finally {
      restarted.child.kill('SIGTERM');
      await new Promise((resolve) => restarted.child.once('exit', resolve));
    }
    const sent = await database.db
      .selectFrom('sandbox_sms')
      .select('recipient')
      .where('send_id', 'in', queueIds)
      .execute();
    const counts = tally(sent.map((row) => row.recipient));
    assert.deepEqual([...counts.keys()].sort(), burst, 'every one sent');
    assert.ok(
      [...counts.values()].every((n) => n <= 2),
      'at most once more: a passcode submitted and not yet recorded at the kill',
    );
  });

  it('sends a one-time passcode killed between its submit and its record once more, no more', {
    timeout: 180_000,
  }, async () => {
    const setup = await setUp();
    const queueId = await killedAt('sms.submitted', setup, '/sms/single', {
      recipient: '919812345678',
      senderName: 'HERALD',
      body: 'Your code is 482913',
    });
    const counts = await resumed(setup.env, queueId);
    assert.deepEqual([...counts], [['919812345678', 2]]);
    const [recipient] = await database.db
      .selectFrom('send_recipients')
      .select(['status', 'message_id'])
      .where('send_id', '=', queueId)
      .execute();
    assert.equal(recipient.status, 'Delivered');
    const copies = await database.db
      .selectFrom('sandbox_sms')
      .select('message_id')
      .where('send_id', '=', queueId)
      .execute();
    const sameId = [recipient.message_id, recipient.message_id];
    assert.deepEqual(
      copies.map((copy) => copy.message_id),
      sameId,
      'rendered again, it kept its messageId',
    );
  });

  it('over SMPP, a worker killed mid-batch (no pause: SIGKILL while it submits) then restarted reaches every ' +
    'recipient, and sends again at most binds × window', {
    timeout: 180_000,
  }, async (t) => {
    const smsc = await startSmsc({ receiptDelayMs: 50 });
    try {
      const setup = await setUp(SMPP_LIST);
      const env = {
        ...setup.env,
        SMS_TRANSPORT: `smpp://herald:secret@127.0.0.1:${smsc.port}?binds=${SMPP_BINDS}&window=${SMPP_WINDOW}`,
      };
      const queueId = await killedAfter(env, async () => {
        const { data } = await accepted(setup, '/sms/batch', {
          listId: [setup.listId],
          senderName: 'HERALD',
          body: 'sale',
        });
        await waitFor(
          'a fifth of the batch at the SMSC',
          async () => smsc.stats().submits.accepted >= SMPP_LIST / 5 || undefined,
          { timeoutMs: 60_000 },
        );
        return data.QueueId;
      });
      const atKill = smsc.stats().submits.accepted;
      assert.ok(atKill < SMPP_LIST, `killed mid-batch (${atKill} of ${SMPP_LIST} submitted)`);

      await servedUntilCompleted(database, env, queueId, 60_000);
      const counts = tally(smsc.received().map((message) => message.recipient));
      const again = [...counts.values()].reduce((sum, n) => sum + n - 1, 0);
      t.diagnostic(
        `killed with ${atKill} of ${SMPP_LIST} submitted; sent a second time: ${again} ` +
          `(bound ${SMPP_BINDS * SMPP_WINDOW})`,
      );
      assert.equal(counts.size, SMPP_LIST, 'every recipient reached');
      assert.ok(
        again <= SMPP_BINDS * SMPP_WINDOW,
        `${again} sent twice, at most binds × window (${SMPP_BINDS * SMPP_WINDOW})`,
      );
      assert.deepEqual(
        [...new Set(counts.values())].filter((n) => n > 2),
        [],
        'none more than twice',
      );
    } finally {
      await smsc.close();
    }
  });

  it('over two SMSC connections, a worker killed mid-batch then restarted reaches every recipient, and sends ' +
    'again at most the sum of binds × window', {
    timeout: 180_000,
  }, async (t) => {
    const odd = await startSmsc({ receiptDelayMs: 50 });
    const rest = await startSmsc({ receiptDelayMs: 50, firstId: 1 });
    try {
      const setup = await setUp(SMPP_LIST);
      const keyring = loadEncryptionKey(database.url, keyFromHex(setup.env.ENCRYPTION_KEY ?? ''));
      const query = `binds=${SMPP_BINDS}&window=${SMPP_WINDOW}`;
      for (const [name, smsc] of [
        ['odd', odd],
        ['rest', rest],
      ] as const) {
        const url = `smpp://herald:secret@127.0.0.1:${smsc.port}?${query}`;
        await addConnection(database.db, keyring, new ManualClock(0), { name, url });
      }
      // The odd thousands of the list's numbers (91980000<d>xxx) to one SMSC, the rest to the other.
      const oddThousands = ['1', '3'].map((d) => ({ prefix: `91980000${d}`, smsc: ['odd'] }));
      await replaceRoutes(database.db, [...oddThousands, { prefix: '', smsc: ['rest'] }]);
      const received = () => [...odd.received(), ...rest.received()].map((message) => message.recipient);
      const queueId = await killedAfter(setup.env, async () => {
        const { data } = await accepted(setup, '/sms/batch', {
          listId: [setup.listId],
          senderName: 'HERALD',
          body: 'sale',
        });
        await waitFor(
          'a fifth of the batch at the SMSCs',
          async () => received().length >= SMPP_LIST / 5 || undefined,
          {
            timeoutMs: 60_000,
          },
        );
        return data.QueueId;
      });
      const atKill = received().length;
      assert.ok(atKill < SMPP_LIST, `killed mid-batch (${atKill} of ${SMPP_LIST} submitted)`);

      await servedUntilCompleted(database, setup.env, queueId, 60_000);
      const counts = tally(received());
      const again = [...counts.values()].reduce((sum, n) => sum + n - 1, 0);
      const bound = 2 * SMPP_BINDS * SMPP_WINDOW;
      t.diagnostic(`killed with ${atKill} of ${SMPP_LIST} submitted; sent a second time: ${again} (bound ${bound})`);
      assert.equal(counts.size, SMPP_LIST, 'every recipient reached');
      assert.ok(again <= bound, `${again} sent twice, at most the connections' binds × window (${bound})`);
      const oddOnes = odd.received().map((message) => message.recipient);
      assert.ok(
        oddOnes.every((number) => /^91980000[13]/.test(number)),
        'each number over the connection of its route',
      );
      assert.equal(new Set(oddOnes).size, 2000, 'the odd thousands, 2,000 numbers');
    } finally {
      await odd.close();
      await rest.close();
    }
  });
});
