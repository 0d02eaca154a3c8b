import assert from 'node:assert/strict';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { afterEach, beforeEach, it } from 'node:test';
import { Registry } from 'prom-client';
import smpp from 'smpp';
import { silentLog } from '../../src/log.ts';
import { ManualClock } from '../../src/clock.ts';
import type { ReceiveInboundSms, SmsTransport } from '../../src/sms/transport.ts';
import { smppTransport } from '../../src/sms/transports/smpp/transport.ts';
import { parseSmppUrl } from '../../src/sms/transports/smpp/url.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';
import { outgoingMessages } from './smpp-support.ts';

type Pdu = InstanceType<typeof smpp.PDU>;
type Session = InstanceType<typeof smpp.Session>;

/**
 * An SMSC out of the spec, or a hostile one: what it sends must neither stall a bind, nor lose
 * an answer, nor stop what PostgreSQL's text and indexes cannot hold from being kept.
 */
/**
 * An SMSC, as a Python script for a process of its own, that answers a bind, then sends `flood`
 * enquire_links and reads none of the answers until a line comes on its standard input; it
 * prints its port, then every 100 ms what it has not yet sent and how many answers it read. Its
 * receive buffer is set small: Linux would otherwise take tens of megabytes of answers for it.
 */
const floodingSmsc = (flood: number) => `
import json, socket, struct, sys, threading, time
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
server.bind(('127.0.0.1', 0))
server.listen(1)
print(json.dumps({'port': server.getsockname()[1]}), flush=True)
link, _ = server.accept()
bind = link.recv(1024)
link.sendall(struct.pack('>IIII', 17, 0x80000009, 0, struct.unpack('>I', bind[12:16])[0]) + b'\\0')
links = b''.join(struct.pack('>IIII', 16, 0x15, 0, i + 1) for i in range(${flood}))
sent = 0
answered = 0
def write():
    global sent
    while sent < len(links):
        sent += link.send(links[sent:sent + 65536])
def read():
    global answered
    sys.stdin.readline()
    while True:
        chunk = link.recv(65536)
        if not chunk:
            break
        answered += len(chunk)
threading.Thread(target=write, daemon=True).start()
threading.Thread(target=read, daemon=True).start()
while True:
    print(json.dumps({'unsent': len(links) - sent, 'answered': answered // 16}), flush=True)
    time.sleep(0.1)
`;

forEachDatabase((dialect) => {
  let database: TestDatabase;
  let transport: SmsTransport | undefined;
  let server: ReturnType<typeof smpp.createServer> | undefined;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(async () => {
    await transport?.close();
    server?.close();
    await database.close();
    transport = undefined;
    server = undefined;
  });

  /** What the SMSC was sent, and the handset messages Herald took. */
  const seen = {
    pdus: [] as Pdu[],
    binds: 0,
    inbound: [] as Array<Parameters<ReceiveInboundSms>[0]>,
    warnings: [] as Array<{ object: object; message: string }>,
  };
  /** An SMSC of the `smpp` package's, doing `onSubmit` with each submit_sm and `onBind` once bound. */
  async function hostile(handlers: {
    onSubmit?: (session: Session, pdu: Pdu) => void;
    onBind?: (s: Session) => void;
    /** Answers the bind_transceiver itself: false leaves it to the default answer. */
    answerBind?: (session: Session, pdu: Pdu) => boolean;
    reconnectMaxMs?: number;
  }) {
    seen.pdus = [];
    seen.binds = 0;
    seen.inbound = [];
    seen.warnings = [];
    server = smpp.createServer((session) => {
      session.on('error', () => {});
      session.on('pdu', (pdu: Pdu) => {
        if (pdu.command === 'bind_transceiver') {
          seen.binds += 1;
          if (handlers.answerBind?.(session, pdu)) return;
          session.send(pdu.response());
          handlers.onBind?.(session);
        } else if (pdu.command === 'submit_sm') handlers.onSubmit?.(session, pdu);
        else if (pdu.command === 'unbind') session.send(pdu.response());
        else seen.pdus.push(pdu);
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const url = `smpp://herald:secret@127.0.0.1:${(server.address() as AddressInfo).port}?binds=1`;
    const clock = new ManualClock(Date.now());
    transport = smppTransport(parseSmppUrl(url), {
      database,
      clock,
      metrics: new Registry(),
      receiveInbound: async (mo) => {
        seen.inbound.push(mo);
        return null;
      },
      timing: { reconnectBaseMs: 20, reconnectMaxMs: handlers.reconnectMaxMs ?? 100, responseTimeoutMs: 400 },
      log: { ...silentLog, warn: (object: object, message: string) => seen.warnings.push({ object, message }) },
    });
  }
  const message = outgoingMessages();
  const within = <T>(promise: Promise<T>, what: string, ms = 5000) =>
    Promise.race([
      promise,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms).unref()),
    ]);
  const kept = async (table: 'sms_receipts' | 'smpp_submits') =>
    (await database.db.selectFrom(table).select('operator_message_id').orderBy('operator_message_id').execute()).map(
      (row) => row.operator_message_id,
    );

  it('takes its answer though the SMSC sent a request under its sequence number, and refuses the request', async () => {
    await hostile({
      onSubmit(session, submit) {
        // The SMSC numbers its own requests: one may carry the number of a submit in flight.
        session.send(
          new smpp.PDU('data_sm', { sequence_number: submit.sequence_number, source_addr: '1', destination_addr: '2' }),
        );
        // A command SMPP 3.4 does not know, written by hand: 16 octets of header.
        const unknown = Buffer.alloc(16);
        unknown.writeUInt32BE(16, 0);
        unknown.writeUInt32BE(0x00000999, 4);
        unknown.writeUInt32BE(4242, 12);
        session.socket.write(unknown);
        setTimeout(() => session.send(submit.response({ message_id: 'abc' })), 50);
      },
    });
    const [result] = await within(
      transport!.submit([message('hello')], new AbortController().signal, { urgent: true }),
      'the submit answered',
    );
    assert.equal(result.accepted, true);
    await waitFor('both refusals', async () => (seen.pdus.length >= 2 ? true : undefined));
    assert.deepEqual(seen.pdus.map((pdu) => [pdu.command, pdu.command_status]).sort(), [
      ['data_sm_resp', smpp.errors.ESME_RINVCMDID],
      ['generic_nack', smpp.errors.ESME_RINVCMDID],
    ]);
  });

  it('warns, once, of an SMSC that accepts submits with no message_id, whose receipts cannot match', async () => {
    await hostile({ onSubmit: (session, submit) => session.send(submit.response({ message_id: '' })) });
    for (const text of ['one', 'two']) {
      const [result] = await within(
        transport!.submit([message(text)], new AbortController().signal, { urgent: true }),
        'the submit answered',
      );
      assert.equal(result.accepted, true);
    }
    const idless = seen.warnings.filter(({ message }) => /no message_id/.test(message));
    assert.deepEqual(
      idless.map(({ object }) => object),
      [{ smsc: 'default' }],
    );
  });

  it('binds again at once after a PDU it cannot parse, rather than reading nothing more', async () => {
    await hostile({
      onBind(session) {
        // A command_length of 8: shorter than a header.
        if (seen.binds === 1) session.socket.write(Buffer.from([0, 0, 0, 8, 0, 0, 0, 4]));
      },
    });
    await within(
      waitFor('a second bind', async () => (seen.binds >= 2 ? true : undefined)),
      'bound again',
    );
  });

  it('waits longer each time a bind is lost as soon as it is made, not four times a second', async () => {
    const started = performance.now();
    await hostile({
      // A command_length of 8 on every bind: shorter than a header, the link cannot be framed.
      onBind: (session) => session.socket.write(Buffer.from([0, 0, 0, 8, 0, 0, 0, 4])),
      reconnectMaxMs: 400,
    });
    await new Promise((resolve) => setTimeout(resolve, 1500 - (performance.now() - started)));
    // Waits of 10–20, 20–40, 40–80, 80–160, then 200–400 ms: under 12 binds in 1.5 s, where
    // waits that started again at each bind made one every 10–20 ms.
    assert.ok(seen.binds >= 3 && seen.binds <= 12, `${seen.binds} binds`);
  });

  it('answers a deliver_sm it cannot decode with a permanent error, keeps the link and sends once', async () => {
    let submits = 0;
    await hostile({
      onBind(session) {
        // A valid deliver_sm, then a TLV that declares 2 octets and holds 1 (its length fixed to match).
        const valid = new smpp.PDU('deliver_sm', {
          sequence_number: 77,
          source_addr: '919812300074',
          short_message: 'id:1 stat:DELIVRD',
          esm_class: 0x04,
        }).toBuffer();
        const broken = Buffer.concat([valid, Buffer.from([0x02, 0x04, 0x00, 0x02, 0x0a])]);
        broken.writeUInt32BE(broken.length, 0);
        session.socket.write(broken);
      },
      onSubmit(session, submit) {
        submits += 1;
        setTimeout(() => session.send(submit.response({ message_id: 'abc' })), 50);
      },
    });
    const [result] = await within(
      transport!.submit([message('hello')], new AbortController().signal, { urgent: true }),
      'the submit answered',
    );
    assert.equal(result.accepted, true);
    await waitFor('the refusal', async () => (seen.pdus.length >= 1 ? true : undefined));
    assert.deepEqual(
      seen.pdus.map((pdu) => [pdu.command, pdu.sequence_number, pdu.command_status]),
      [['deliver_sm_resp', 77, 0x65]],
    );
    assert.deepEqual([seen.binds, submits], [1, 1]);
  });

  it('takes a handset’s text and a receipt’s from message_payload when short_message is empty', async () => {
    await hostile({
      onBind(session) {
        const payload = (text: string) => ({ message_payload: text, short_message: '', data_coding: 0 });
        session.deliver_sm({ source_addr: '919812300075', destination_addr: 'HERALD', ...payload('a long reply') });
        session.deliver_sm({ source_addr: '919812300076', esm_class: 0x04, ...payload('id:0ABE stat:DELIVRD') });
      },
    });
    await waitFor('both answered', async () => (seen.pdus.length === 2 ? true : undefined));
    assert.deepEqual(
      seen.inbound.map((mo) => [mo.from, mo.text]),
      [['919812300075', 'a long reply']],
    );
    // Kept under each reading of its id, as hex and as decimal (message-ids.ts), for its part to come.
    await waitFor('the receipt kept', async () => ((await kept('sms_receipts')).length === 2 ? true : undefined));
    assert.deepEqual(await kept('sms_receipts'), ['2750', 'abe']);
  });

  it('refuses a deliver_sm cut short before its message, rather than taking it from a handset', async () => {
    await hostile({
      onBind(session) {
        const whole = new smpp.PDU('deliver_sm', {
          sequence_number: 78,
          source_addr: '919812300077',
          destination_addr: 'HERALD',
          short_message: 'hi',
        }).toBuffer();
        // Header, service_type, source and destination addresses: it ends there.
        const cut = whole.subarray(0, 16 + 1 + 2 + 13 + 2 + 7);
        cut.writeUInt32BE(cut.length, 0);
        session.socket.write(cut);
      },
    });
    await waitFor('the refusal', async () => (seen.pdus.length >= 1 ? true : undefined));
    assert.deepEqual(
      seen.pdus.map((pdu) => [pdu.command, pdu.sequence_number, pdu.command_status]),
      [['deliver_sm_resp', 78, 0x65]],
    );
    assert.deepEqual(seen.inbound, []);
  });

  it('takes a generic_nack to a submit as a refusal for now, whatever its status', async () => {
    await hostile({
      onSubmit: (session, submit) =>
        session.send(new smpp.PDU('generic_nack', { sequence_number: submit.sequence_number, command_status: 0 })),
    });
    const [result] = await within(
      transport!.submit([message('hello')], new AbortController().signal, { urgent: true }),
      'the submit answered',
    );
    assert.deepEqual([result.accepted, !result.accepted && result.permanent], [false, false]);
  });

  // Beside other test files and busy loops: 6-8 s for the SMSC's process to listen, 20-23 s for Herald to read
  // what it will, 88-91 s in all (past the minute it had); three minutes.
  it('reads no more from an SMSC that does not read its answers, and answers all once it does', {
    timeout: 180_000,
  }, async () => {
    // Enough enquire_links that their answers outgrow what the kernel holds for a link (4 MB or so).
    // The SMSC is a process of its own: in this one, its writes would wait for Herald's reads.
    const flood = 800_000;
    const child = spawn('python3', ['-c', floodingSmsc(flood)], { stdio: ['pipe', 'pipe', 'inherit'] });
    let status: { port?: number; unsent?: number; answered?: number } = {};
    createInterface({ input: child.stdout }).on('line', (line) => (status = JSON.parse(line)));
    try {
      const port = await waitFor('the SMSC listening', async () => status.port, { timeoutMs: 30_000 });
      transport = smppTransport(parseSmppUrl(`smpp://herald:secret@127.0.0.1:${port}?binds=1`), {
        database,
        clock: new ManualClock(Date.now()),
        metrics: new Registry(),
        receiveInbound: async () => null,
        // This SMSC answers nothing: Herald's keep-alive, 30 s after the bind, would go unanswered and
        // reset the link (10 s later) before a loaded machine has read and answered the flood.
        timing: { enquireLinkMs: 600_000 },
      });
      // Once what the SMSC has not sent stops shrinking for 1.5 s, Herald has read all it will: some
      // of the flood is still unsent, where a Herald that read on took it all.
      let last: number | undefined;
      let still = 0;
      const unsent = await waitFor(
        'what the SMSC has not sent to stop shrinking',
        async () => {
          still = status.unsent !== undefined && status.unsent === last ? still + 1 : 0;
          last = status.unsent;
          await new Promise((resolve) => setTimeout(resolve, 100));
          return still >= 15 ? last : undefined;
        },
        { timeoutMs: 60_000 },
      );
      assert.ok(unsent > 0, 'Herald stopped reading');
      child.stdin.write('read\n');
      await waitFor('every answer', async () => (status.answered === flood ? true : undefined), { timeoutMs: 60_000 });
    } finally {
      child.kill();
    }
  });

  it('binds again after a bind answered by a generic_nack, or not answered at all', async () => {
    await hostile({
      answerBind(session, bind) {
        // An SMPP 3.3 SMSC's answer, with no error status; then silence; then a bind.
        if (seen.binds === 1) {
          session.send(new smpp.PDU('generic_nack', { sequence_number: bind.sequence_number, command_status: 0 }));
          return true;
        }
        return seen.binds === 2;
      },
      onSubmit: (session, submit) => session.send(submit.response({ message_id: 'abc' })),
    });
    const [result] = await within(
      transport!.submit([message('hello')], new AbortController().signal, { urgent: true }),
      'the submit answered',
    );
    assert.equal(result.accepted, true);
    assert.equal(seen.binds, 3);
  });

  it('drops a receipt with a NUL in its id and keeps the rest of its group', async () => {
    await hostile({
      onBind(session) {
        const receipt = (text: Buffer | string, dataCoding: number) =>
          session.deliver_sm({
            source_addr: '919812300071',
            esm_class: 0x04,
            data_coding: dataCoding,
            short_message: text,
          });
        // UCS-2 keeps a NUL that GSM 03.38 would read as @.
        receipt(
          Buffer.from(
            'id:12\u00003 stat:DELIVRD err:000'.replace(/./gs, (c) => `\u0000${c}`),
            'latin1',
          ),
          8,
        );
        receipt('id:00000ABD sub:001 dlvrd:001 stat:DELIVRD err:000 text:', 0);
      },
    });
    await waitFor('both answered', async () =>
      seen.pdus.filter((pdu) => pdu.command === 'deliver_sm_resp').length === 2 ? true : undefined,
    );
    assert.deepEqual(
      seen.pdus.map((pdu) => pdu.command_status),
      [0, 0],
    );
    assert.deepEqual(await kept('sms_receipts'), ['2749', 'abd']);
  });

  it('keeps a message id longer than SMPP allows as a digest, the same from the answer and the receipt', async () => {
    const long = 'f'.repeat(3000);
    await hostile({
      onSubmit(session, submit) {
        session.send(submit.response({ message_id: long }));
        session.deliver_sm({
          source_addr: '919812300072',
          esm_class: 0x04,
          data_coding: 0,
          receipted_message_id: long,
          message_state: 2,
          short_message: 'stat:DELIVRD',
        });
      },
    });
    const [result] = await within(
      transport!.submit([{ ...message('hello'), recipient: '919812300072' }], new AbortController().signal, {
        urgent: true,
      }),
      'the submit answered',
    );
    assert.equal(result.accepted, true);
    await waitFor('the answer and the receipt kept', async () =>
      (await kept('smpp_submits')).length === 1 && (await kept('sms_receipts')).length > 0 ? true : undefined,
    );
    const [answer] = await kept('smpp_submits');
    assert.match(answer, /^sha256:[0-9a-f]{64}$/);
    assert.ok((await kept('sms_receipts')).includes(answer), 'the receipt is kept under the same id');
  });

  it('hands on a handset’s message with a NUL in it, U+FFFD in its place', async () => {
    await hostile({
      onBind(session) {
        session.deliver_sm({
          source_addr: '919812300073',
          destination_addr: 'HERALD',
          esm_class: 0,
          data_coding: 8,
          short_message: Buffer.from([0x00, 0x48, 0x00, 0x00, 0x00, 0x49]),
        });
      },
    });
    await waitFor('the message handed on', async () => (seen.inbound.length === 1 ? true : undefined));
    assert.equal(seen.inbound[0].text, 'H\ufffdI');
  });
});
