import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, beforeEach, it } from 'node:test';
import pg from 'pg';
import { Registry } from 'prom-client';
import { ManualClock } from '../../src/clock.ts';
import { sqlitePath } from '../../src/db/database.ts';
import { receiveInboundSms } from '../../src/sms/inbound.ts';
import type { OutgoingSms, SmsTransport } from '../../src/sms/transport.ts';
import { SmppJournal, smppTransport } from '../../src/sms/transports/smpp/transport.ts';
import { parseSmppUrl } from '../../src/sms/transports/smpp/url.ts';
import { startSmsc, type Smsc } from '../../src/sim/smsc.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';
import { outgoingMessages } from './smpp-support.ts';

/**
 * The bound on what a crash sends again, across a process's SMPP connections
 * (transports/smpp/resend-bound.ts): with the answers' writes held up by another connection's
 * lock, a connection whose partner has nothing to send goes past its own binds × window up to
 * the sum, and no further; the partner's parts then wait for the answers to be recorded.
 */
const WINDOW = 4;

forEachDatabase((dialect) => {
  let database: TestDatabase;
  const simulators: Smsc[] = [];
  const transports: SmsTransport[] = [];
  let release: (() => Promise<void>) | undefined;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(async () => {
    await release?.();
    release = undefined;
    for (const transport of transports.splice(0)) await transport.close();
    for (const smsc of simulators.splice(0)) await smsc.close();
    await database.close();
  });

  /** Holds every write to smpp_submits until the returned function is called. */
  async function holdAnswers(): Promise<() => Promise<void>> {
    const file = sqlitePath(database.url);
    if (file !== undefined) {
      const other = new DatabaseSync(file);
      other.exec('begin immediate');
      return async () => {
        other.exec('rollback');
        other.close();
      };
    }
    const other = new pg.Client({ connectionString: database.url });
    await other.connect();
    await other.query('begin');
    await other.query('lock table smpp_submits in exclusive mode');
    return async () => {
      await other.query('rollback');
      await other.end();
    };
  }

  it('lets a connection use the bound of one with nothing to send, up to the sum of binds × window', {
    timeout: 30_000,
  }, async () => {
    const clock = new ManualClock(Date.now());
    const journal = new SmppJournal(database, clock);
    const connect = async (name: string) => {
      const smsc = await startSmsc({ receiptDelayMs: 60_000 });
      simulators.push(smsc);
      const url = `smpp://herald:secret@127.0.0.1:${smsc.port}?binds=1&window=${WINDOW}&urgent=0`;
      const transport = smppTransport(parseSmppUrl(url), {
        name,
        database,
        clock,
        metrics: new Registry(),
        journal,
        receiveInbound: (mo) => receiveInboundSms(database, clock, mo, { defaultSenderName: 'HERALD' }),
      });
      transports.push(transport);
      await waitFor(`${name} bound`, async () => (transport.bindsUp?.() === 1 ? true : undefined));
      return { smsc, transport };
    };
    const a = await connect('a');
    const b = await connect('b');
    const message = outgoingMessages();
    const send = (transport: SmsTransport, messages: OutgoingSms[]) =>
      transport.submit(messages, new AbortController().signal);

    release = await holdAnswers();
    const toA = send(
      a.transport,
      Array.from({ length: 12 }, () => message()),
    );
    await waitFor('a at the sum of both bounds', async () =>
      a.smsc.received().length === 2 * WINDOW ? true : undefined,
    );
    const toB = send(b.transport, [message(), message()]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(a.smsc.received().length, 2 * WINDOW, 'a goes no further than the sum while nothing is recorded');
    assert.equal(b.smsc.received().length, 0, "b waits: a holds the whole bound, and b's share comes back first");

    await release();
    release = undefined;
    const results = [...(await toA), ...(await toB)];
    assert.ok(
      results.every((result) => result.accepted),
      'every part answered and recorded',
    );
    assert.equal(new Set(a.smsc.received().map((m) => m.recipient)).size, 12, 'a sent each of its twelve once');
    assert.equal(b.smsc.received().length, 2, 'b sent its two');
    await journal.answers.drained();
    const recorded = await database.db.selectFrom('smpp_submits').select(['smsc']).execute();
    assert.deepEqual(
      [recorded.filter((row) => row.smsc === 'a').length, recorded.filter((row) => row.smsc === 'b').length],
      [12, 2],
    );
  });
});
