import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import smpp from 'smpp';
import { ManualClock } from '../../src/clock.ts';
import type { OutgoingSms, SmsTransport } from '../../src/sms/transport.ts';
import { outgoingMessages } from './smpp-support.ts';
import { parseSmppUrl } from '../../src/sms/transports/smpp/url.ts';
import { smppTransport } from '../../src/sms/transports/smpp/transport.ts';
import { receiveInboundSms } from '../../src/sms/inbound.ts';
import { startSmsc, type Smsc, type SmscOptions } from '../../src/sim/smsc.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';

/**
 * The transport on its own against the simulator: the link kept alive, a bind that comes back
 * after the SMSC went away, and passcodes ahead of a campaign on the rate held for them.
 */
forEachDatabase((dialect) => {
  let database: TestDatabase;
  let smsc: Smsc | undefined;
  let transport: SmsTransport | undefined;
  const metrics = new Registry();
  let logged: Array<{ level: string; message: string; bind?: string; reason?: string }>;
  const at = (level: string) => (fields: { bind?: string; reason?: string }, message: string) =>
    void logged.push({ level, message, bind: fields.bind, reason: fields.reason });
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
    logged = [];
  });
  afterEach(async () => {
    await transport?.close();
    await smsc?.close();
    await database.close();
    transport = undefined;
    smsc = undefined;
  });

  const open = async (query: string, options: SmscOptions = {}, timing = {}) => {
    smsc = await startSmsc({ receiptDelayMs: 10, ...options });
    const clock = new ManualClock(Date.now());
    transport = smppTransport(parseSmppUrl(`smpp://herald:secret@127.0.0.1:${smsc.port}?${query}`), {
      database,
      clock,
      metrics,
      receiveInbound: (mo) => receiveInboundSms(database, clock, mo, { defaultSenderName: 'HERALD' }),
      log: { info: at('info'), warn: at('warn'), error: at('error') },
      timing: { reconnectBaseMs: 20, reconnectMaxMs: 100, ...timing },
    });
  };
  const message = outgoingMessages();
  const submit = (messages: OutgoingSms[], urgent = false) =>
    transport!.submit(messages, new AbortController().signal, { urgent });
  const bound = async () =>
    (await metrics.getSingleMetricAsString('herald_smpp_binds')).match(/smsc="default",state="bound"} (\d+)/)?.[1];

  it('keeps an idle link alive with enquire_link', async () => {
    await open('binds=1', {}, { enquireLinkMs: 50 });
    await waitFor('enquire_link', async () => (smsc!.stats().enquireLinks >= 2 ? true : undefined));
  });

  it('binds again after the SMSC went away, and sends what waited meanwhile', async () => {
    await open('binds=2');
    await waitFor('two binds', async () => ((await bound()) === '2' ? true : undefined));
    const port = smsc!.port;
    await smsc!.close();
    await waitFor('binds lost', async () => ((await bound()) === '0' ? true : undefined));
    const waiting = submit([message('sent once the SMSC is back')]);
    const binds = [`herald@127.0.0.1:${port}#1`, `herald@127.0.0.1:${port}#2`];
    const told = (message: string) =>
      logged
        .filter((line) => line.message === message)
        .map((line) => `${line.level} ${line.bind}`)
        .sort();
    // Down long enough for each bind to fail reconnecting more than once.
    await waitFor('reconnections refused', async () =>
      binds.every((bind) => told('SMPP bind still down').filter((line) => line === `info ${bind}`).length >= 2)
        ? true
        : undefined,
    );
    smsc = await startSmsc({ port, receiptDelayMs: 10 });
    const [result] = await waiting;
    assert.equal(result.accepted, true);
    assert.deepEqual(
      smsc.received().map((m) => m.text),
      ['sent once the SMSC is back'],
    );
    await waitFor('both binds back', async () => ((await bound()) === '2' ? true : undefined));
    // Each bind's loss and its return are one warning each naming the bind, however many
    // reconnections failed between them; its first bind is not a warning.
    assert.deepEqual(
      told('SMPP bound'),
      binds.map((bind) => `info ${bind}`),
    );
    assert.deepEqual(
      told('SMPP bind lost'),
      binds.map((bind) => `warn ${bind}`),
    );
    assert.deepEqual(
      told('SMPP bind back'),
      binds.map((bind) => `warn ${bind}`),
    );
    // The refused reconnections are those info lines, never a warning; the loss names why.
    assert.deepEqual(
      logged.filter((line) => line.level === 'warn').map((line) => line.message),
      ['SMPP bind lost', 'SMPP bind lost', 'SMPP bind back', 'SMPP bind back'],
    );
    assert.match(logged.find((line) => line.message === 'SMPP bind still down')?.reason ?? '', /ECONNREFUSED/);
    assert.ok(!JSON.stringify(logged).includes('secret'), 'the password is never logged');
    // Its slot frees with the answer, which is recorded.
    await waitFor('the answer recorded', async () =>
      (await database.db.selectFrom('smpp_submits').selectAll().execute()).length === 1 ? true : undefined,
    );
    await waitFor('the slot freed', async () =>
      (await metrics.getSingleMetricAsString('herald_smpp_window_in_use')).includes(
        'herald_smpp_window_in_use{smsc="default"} 0',
      )
        ? true
        : undefined,
    );
  });

  it('answers a message an earlier try submitted with that try’s ids and time, and submits it no more', async () => {
    await open('binds=1');
    const [earlier, fresh] = [message(), message()];
    const answeredAt = Date.now() - 3_600_000;
    await database.db
      .insertInto('smpp_submits')
      .values({
        send_id: earlier.sendId,
        recipient: earlier.recipient,
        part: 1,
        parts: 1,
        operator_message_id: 'earlier-1',
        at: answeredAt,
        smsc: 'default',
      })
      .execute();
    const [again, first] = await submit([earlier, fresh]);
    assert.deepEqual(again, {
      accepted: true,
      operatorMessageIds: ['earlier-1'],
      smsc: ['default'],
      submittedAt: answeredAt,
    });
    assert.ok(first.accepted && first.submittedAt === undefined, 'a part submitted now: the page’s time');
    assert.deepEqual(
      smsc!.received().map((m) => m.recipient),
      [fresh.recipient],
    );
  });

  it('sends passcodes within a second on their share, ahead of a campaign held to 30/s', {
    timeout: 30_000,
  }, async () => {
    // 40 a second: 30 for everything, 10 held for passcodes.
    await open('binds=1&tps=40&urgent=0.25');
    const campaign = Array.from({ length: 90 }, () => message());
    const started = performance.now();
    const campaignDone = submit(campaign).then(() => performance.now() - started);
    // The campaign under way, most of it still waiting for the rate.
    await waitFor('the campaign at the SMSC', async () => (smsc!.received().length >= 10 ? true : undefined));
    const passcodeStart = performance.now();
    const [passcode] = await submit([message('code 1234')], true);
    const passcodeMs = performance.now() - passcodeStart;
    assert.equal(passcode.accepted, true);
    // A token of its own every 100 ms, then a read, a submit_sm and a write: 2-60 ms on SQLite and
    // 70-260 ms on PostgreSQL beside busy loops. Behind the campaign (80 more at 30/s) it would take
    // over 2.5 s.
    assert.ok(passcodeMs < 1000, `the passcode went in ${passcodeMs} ms`);
    const campaignMs = await campaignDone;
    // 90 at 30 a second, less the first tenth of a second's bucket: about 3 s, never faster.
    assert.ok(campaignMs > 2500, `the campaign took ${campaignMs} ms`);
    const takenBefore = smsc!.received().findIndex((m) => m.text === 'code 1234');
    assert.ok(takenBefore < 40, `the passcode went before most of the campaign (${takenBefore})`);
  });

  it(
    'answers every deliver_sm: a receipt for an id it never sent is kept and answered, an unreadable one and a ' +
      'handset’s message answered',
    async () => {
      // An SMSC of the `smpp` package's, to send what the simulator never does.
      const answers: number[] = [];
      const server = smpp.createServer((session) => {
        session.on('error', () => {});
        session.on('bind_transceiver', (pdu: InstanceType<typeof smpp.PDU>) => {
          session.send(pdu.response());
          const deliver = (fields: Record<string, unknown>) =>
            session.deliver_sm({ data_coding: 0, ...fields }, (answer: InstanceType<typeof smpp.PDU>) =>
              answers.push(answer.command_status),
            );
          deliver({
            source_addr: '919812300071',
            esm_class: 0x04,
            short_message:
              'id:00000ABC sub:001 dlvrd:001 submit date:2611221200 done date:2611221200 stat:DELIVRD err:000 text:',
          });
          deliver({ source_addr: '919812300072', esm_class: 0x04, short_message: 'this is not a receipt' });
          deliver({ source_addr: '919812300073', esm_class: 0x00, short_message: 'STOP' });
        });
      });
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      try {
        const clock = new ManualClock(Date.now());
        const url = `smpp://herald:secret@127.0.0.1:${(server.address() as AddressInfo).port}?binds=1`;
        transport = smppTransport(parseSmppUrl(url), {
          database,
          clock,
          metrics,
          receiveInbound: (mo) => receiveInboundSms(database, clock, mo, { defaultSenderName: 'HERALD' }),
        });
        await waitFor('three answers', async () => (answers.length === 3 ? true : undefined));
        assert.deepEqual(answers, [0, 0, 0]);
        // Kept under each reading of its id, for a submit recorded later.
        const kept = await database.db
          .selectFrom('sms_receipts')
          .select('operator_message_id')
          .orderBy('operator_message_id')
          .execute();
        assert.deepEqual(
          kept.map((r) => r.operator_message_id),
          ['2748', 'abc'],
        );
      } finally {
        await transport?.close();
        transport = undefined;
        server.close();
      }
    },
  );
});
