import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { PAGE } from '../../src/messaging/pipeline.ts';
import { startSmtpSink, type ReceivedMail, type SmtpSink } from '../../src/sim/smtp.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { accepted, crashSetUp, killedAfter, servedUntilCompleted, tally } from '../support/crash.ts';
import { buildBatch } from './support.ts';

const LIST = 1200; // more than two pages of 500

// A serve killed (SIGKILL) after the relay took a page of an email batch and before the page's
// answers were recorded — the worst moment — then a serve started again: what the relay got.
forEachDatabase((dialect) => {
  let database: TestDatabase;
  let sink: SmtpSink;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
    sink = await startSmtpSink({ httpPort: null });
  });
  afterEach(async () => {
    await sink.close();
    await database.close();
  });

  // Two serves start (20 to 40 s each with the machine loaded) and 1,700 messages go over SMTP:
  // past 90 s so. The timeout only catches a hang.
  it('resumes a batch killed with a page handed over and not recorded: every recipient delivered, at most that ' +
    'page twice', {
    timeout: 240_000,
  }, async () => {
    const setup = await crashSetUp(database, dialect, LIST, (id) => ({
      email: `c${id}@example.com`,
      mobile: null,
      mobile_country_code: null,
      mobile_opt_in: false,
      email_opt_in: true,
    }));
    const env = { ...setup.env, EMAIL_TRANSPORT: `smtp://127.0.0.1:${sink.port}` };
    const batchId = await killedAfter({ ...env, HERALD_TEST_PAUSE_AT: 'email.handed' }, async (doomed) => {
      const { data } = await accepted(
        setup,
        '/email/batch',
        buildBatch({ listId: [setup.listId] }, { recipients: [] }),
      );
      await doomed.logged('herald paused at email.handed');
      return data.BatchId;
    });
    assert.equal(
      sink.received({ limit: 10_000 }).length,
      PAGE,
      'the relay took the first page, whose answers died with the serve',
    );

    await servedUntilCompleted(database, env, batchId, 120_000);
    const counts = tally(sink.received({ limit: 10_000 }).flatMap((m) => m.to));
    assert.equal(counts.size, LIST, 'every recipient delivered');
    const twice = [...counts.values()].filter((n) => n === 2).length;
    assert.ok([...counts.values()].every((n) => n <= 2));
    assert.equal(twice, PAGE, 'those of the page handed over and not recorded, and no others: the documented bound');
    const statuses = await database.db
      .selectFrom('send_recipients')
      .select('status')
      .where('send_id', '=', batchId)
      .groupBy('status')
      .execute();
    assert.deepEqual(
      statuses.map((s) => s.status),
      ['Delivered'],
    );
    // Rendered again, a message kept its Message-ID: the page sent twice, too, carries the ids recorded.
    const rows = await database.db
      .selectFrom('send_recipients')
      .select(['address', 'message_id'])
      .where('send_id', '=', batchId)
      .execute();
    const recorded = new Map(rows.map((r) => [r.address, r.message_id]));
    const header = (m: ReceivedMail) => `\r\nMessage-ID: <${recorded.get(m.to[0])}@`;
    const carries = (m: ReceivedMail) => m.raw.toString('latin1').includes(header(m));
    const strays = sink.received({ limit: 10_000 }).filter((m) => !carries(m));
    assert.deepEqual(
      strays.map((m) => m.to[0]),
      [],
    );
  });
});
