import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, it } from 'node:test';
import { Registry } from 'prom-client';
import smpp from 'smpp';
import { ManualClock } from '../../src/clock.ts';
import type { SmsTransport } from '../../src/sms/transport.ts';
import { SmppJournal, smppTransport } from '../../src/sms/transports/smpp/transport.ts';
import { parseSmppUrl } from '../../src/sms/transports/smpp/url.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { outgoingMessages } from './smpp-support.ts';

type Pdu = InstanceType<typeof smpp.PDU>;
type Session = InstanceType<typeof smpp.Session>;

/**
 * A message refused for now goes over the route's next connection at once (routed.ts), which
 * sends only the parts no connection took (journal.ts, answeredBefore): a refusal is answered
 * only once the parts taken before it are recorded. Two SMSCs of the test's own, over TCP.
 */
forEachDatabase((dialect) => {
  let database: TestDatabase;
  const transports: SmsTransport[] = [];
  const servers: Array<ReturnType<typeof smpp.createServer>> = [];
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(async () => {
    for (const t of transports.splice(0)) await t.close();
    for (const s of servers.splice(0)) s.close();
    await database.close();
  });

  async function server(onSubmit: (session: Session, pdu: Pdu) => void): Promise<number> {
    const s = smpp.createServer((session) => {
      session.on('error', () => {});
      session.on('pdu', (pdu: Pdu) => {
        if (pdu.command === 'bind_transceiver') session.send(pdu.response());
        else if (pdu.command === 'submit_sm') onSubmit(session, pdu);
        else if (pdu.command === 'unbind' || pdu.command === 'enquire_link') session.send(pdu.response());
      });
    });
    s.listen(0, '127.0.0.1');
    await once(s, 'listening');
    servers.push(s);
    return (s.address() as AddressInfo).port;
  }

  it('sends over the next connection only the parts the first did not take: none twice', async () => {
    // First SMSC: takes parts 1 and 2, refuses part 3 for now (ESME_RSYSERR); answers all three together.
    const held: Array<[Session, Pdu]> = [];
    const first = await server((session, pdu) => {
      held.push([session, pdu]);
      if (held.length < 3) return;
      for (const [i, [s, p]] of held.entries())
        s.send(i < 2 ? p.response({ message_id: `a${i + 1}` }) : p.response({ command_status: 0x08 }));
    });
    const secondTook: Pdu[] = [];
    const second = await server((session, pdu) => {
      secondTook.push(pdu);
      session.send(pdu.response({ message_id: `b${secondTook.length}` }));
    });
    const clock = new ManualClock(Date.now());
    const journal = new SmppJournal(database, clock);
    const open = (port: number, name: string) => {
      const t = smppTransport(parseSmppUrl(`smpp://herald:secret@127.0.0.1:${port}?binds=1&window=10`), {
        name,
        database,
        clock,
        journal,
        metrics: new Registry(),
        receiveInbound: async () => null,
      });
      transports.push(t);
      return t;
    };
    const a = open(first, 'a');
    const b = open(second, 'b');
    const message = outgoingMessages()('x'.repeat(400));
    assert.equal(message.segmented.parts.length, 3);
    const signal = new AbortController().signal;
    // What routed.ts does with a refusal for now on a step that is not the last: the next connection, at once.
    const [onA] = await a.submit([message], signal);
    assert.equal(onA.accepted, false);
    assert.equal((onA as { permanent: boolean }).permanent, false);
    const [onB] = await b.submit([message], signal);
    assert.ok(onB.accepted);
    assert.deepEqual(onB.smsc, ['a', 'a', 'b'], 'the message is the two parts the first took and the third');
    assert.equal(secondTook.length, 1, `parts the second SMSC was sent: ${secondTook.length} (1 expected: part 3)`);
  });
});
