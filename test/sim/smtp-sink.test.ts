import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, afterEach, describe, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { createTransport, type SendMailOptions } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport/index.js';
import { parseMailReport } from '../../src/email/report-reader.ts';
import { NotReceived, ReportRefused } from '../../src/sim/smtp-reports.ts';
import { startSmtpSink, type SmtpSink, type SmtpSinkOptions } from '../../src/sim/smtp.ts';

const HERALD = new URL('../../bin/herald', import.meta.url).pathname;
const MAIL = { from: 'news@shop.example', subject: 'Spring sale', text: 'Our spring sale opens today.' };

let sink: SmtpSink | undefined;
afterEach(async () => {
  await sink?.close();
  sink = undefined;
});

async function start(options: SmtpSinkOptions = {}): Promise<SmtpSink> {
  sink = await startSmtpSink(options);
  return sink;
}

/** Sends one message over a connection of its own (no pool), as nodemailer does by default. */
function send(mail: SendMailOptions, transport: SMTPTransport.Options = {}) {
  return createTransport({ host: '127.0.0.1', port: sink!.port, ...transport }).sendMail({ ...MAIL, ...mail });
}

interface SendError {
  code?: string;
  responseCode?: number;
  response?: string;
}

/** The error a send fails with; the test fails if it succeeds. */
async function refusal(mail: SendMailOptions, transport: SMTPTransport.Options = {}): Promise<SendError> {
  try {
    await send(mail, transport);
  } catch (error) {
    return error as SendError;
  }
  return assert.fail(`the send to ${String(mail.to)} was accepted`);
}

async function control(method: string, path: string, body?: unknown) {
  const response = await fetch(`http://127.0.0.1:${sink!.httpPort}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: response.status === 204 ? undefined : await response.json() };
}

describe('accepting', () => {
  it('keeps an accepted message with its envelope and data, readable in process and over HTTP', async () => {
    await start({ now: () => Date.parse('2026-03-01T10:00:00Z') });
    const info = await send({
      to: 'ada@example.com',
      envelope: { from: 'bounces+ab12@mail.example', to: ['ada@example.com'] },
    });
    assert.equal(info.response, '250 OK: queued as 1');

    const [mail] = sink!.received();
    assert.equal(mail.id, 1);
    assert.equal(mail.from, 'bounces+ab12@mail.example');
    assert.deepEqual(mail.to, ['ada@example.com']);
    assert.equal(mail.tls, false);
    assert.equal(mail.receivedAt, Date.parse('2026-03-01T10:00:00Z'));
    assert.ok(Buffer.isBuffer(mail.raw));
    const parsed = await simpleParser(mail.raw);
    assert.equal(parsed.subject, 'Spring sale');
    assert.equal(parsed.text?.trim(), 'Our spring sale opens today.');
    assert.equal(parsed.messageId, info.messageId);

    const listed = await control('GET', '/messages?to=ADA@example.com');
    assert.equal(listed.status, 200);
    assert.equal(listed.body.messages.length, 1);
    const view = listed.body.messages[0];
    assert.deepEqual(
      [view.id, view.from, view.to, view.tls, view.receivedAt],
      [1, 'bounces+ab12@mail.example', ['ada@example.com'], false, '2026-03-01T10:00:00.000Z'],
    );
    assert.equal((await simpleParser(view.raw)).subject, 'Spring sale');
    assert.equal(view.size, mail.raw.length);
    assert.deepEqual((await control('GET', '/messages?to=bob@example.com')).body, { messages: [] });
  });

  it('takes the null sender of a bounce as an empty from, and several recipients in one envelope', async () => {
    await start();
    await send({
      to: ['ada@example.com', 'bob@example.com'],
      envelope: { from: '', to: ['ada@example.com', 'bob@example.com'] },
    });
    const [mail] = sink!.received();
    assert.equal(mail.from, '');
    assert.deepEqual(mail.to, ['ada@example.com', 'bob@example.com']);
    assert.deepEqual(
      sink!.received({ to: 'bob@example.com' }).map((m) => m.id),
      [1],
    );
  });

  it(
    'lists the latest messages with limit, clears them with ' + 'DELETE /messages, and counts answers by class',
    async () => {
      await start();
      for (const to of ['a@example.com', 'b@example.com', 'c@example.com']) await send({ to });
      assert.deepEqual(
        sink!.received({ limit: 2 }).map((m) => m.to[0]),
        ['b@example.com', 'c@example.com'],
      );
      assert.deepEqual(
        (await control('GET', '/messages?limit=1')).body.messages.map((m: { id: number }) => m.id),
        [3],
      );
      assert.equal((await control('GET', '/messages?limit=many')).status, 400);

      assert.equal((await control('DELETE', '/messages')).status, 204);
      assert.deepEqual(sink!.received(), []);
      const stats = (await control('GET', '/stats')).body;
      assert.deepEqual(stats.messages, {
        accepted: 3,
        deferred: 0,
        refused: 0,
        dropped: 0,
        retained: 0,
        firstAt: stats.messages.firstAt,
        lastAt: stats.messages.lastAt,
      });
      assert.ok(stats.messages.firstAt <= stats.messages.lastAt);
      assert.deepEqual(stats.recipients, { accepted: 3, deferred: 0, rejected: 0 });
      assert.deepEqual(stats.replies, { '2xx': 6, '4xx': 0, '5xx': 0 }, 'a 250 to each RCPT TO and to each message');
      assert.equal(stats.connections.opened, 3);

      assert.equal((await control('POST', '/reset')).status, 204);
      assert.equal(sink!.stats().messages.accepted, 0);
    },
  );

  it('keeps only the latest --retain messages but counts them all, and with retain 0 only counts', async () => {
    await start({ retain: 2 });
    for (const to of ['a@example.com', 'b@example.com', 'c@example.com']) await send({ to });
    assert.deepEqual(
      sink!.received().map((m) => [m.id, m.to[0]]),
      [
        [2, 'b@example.com'],
        [3, 'c@example.com'],
      ],
    );
    assert.equal(sink!.stats().messages.accepted, 3);
    assert.equal(sink!.stats().messages.retained, 2);
    await sink!.close();

    await start({ retain: 0 });
    for (const to of ['a@example.com', 'b@example.com']) await send({ to });
    assert.deepEqual(sink!.received(), []);
    assert.equal(sink!.stats().messages.accepted, 2);
    assert.equal(sink!.stats().messages.retained, 0);
  });

  it('refuses a message over maxSize with 552 and keeps nothing', async () => {
    await start({ maxSize: 2000 });
    const error = await refusal({ to: 'ada@example.com', text: 'x'.repeat(5000) });
    assert.equal(error.responseCode, 552);
    assert.deepEqual(sink!.received(), []);
    assert.equal(sink!.stats().messages.refused, 1);
  });
});

describe('rules', () => {
  it('defers an address twice with 451 4.3.0, then accepts it, once', async () => {
    await start({ rules: [{ match: 'ada@example.com', action: 'defer', times: 2 }] });
    for (let attempt = 1; attempt <= 2; attempt++) {
      const error = await refusal({ to: 'ada@example.com' });
      assert.equal(error.code, 'EENVELOPE');
      assert.equal(error.responseCode, 451);
      assert.equal(error.response, '451 4.3.0 try again later');
    }
    assert.match((await send({ to: 'ada@example.com' })).response, /^250 /);
    assert.match((await send({ to: 'bob@example.com' })).response, /^250 /, 'another address is not deferred');
    assert.deepEqual(
      sink!.received().map((m) => m.to),
      [['ada@example.com'], ['bob@example.com']],
    );
    assert.deepEqual(sink!.stats().recipients, { accepted: 2, deferred: 2, rejected: 0 });
    assert.deepEqual(sink!.stats().replies, { '2xx': 4, '4xx': 2, '5xx': 0 });
  });

  it('counts deferrals per address under a regular expression, with the code and status given', async () => {
    await start({
      rules: [{ match: /@slow\.example$/, action: 'defer', times: 1, code: 421, status: '4.4.2', text: 'busy' }],
    });
    assert.equal((await refusal({ to: 'a@slow.example' })).response, '421 4.4.2 busy');
    assert.equal((await refusal({ to: 'b@slow.example' })).response, '421 4.4.2 busy');
    await send({ to: 'a@slow.example' });
    await send({ to: 'b@slow.example' });
    assert.equal(sink!.received().length, 2);
  });

  it('rejects with the reply code and enhanced status code exactly as given', async () => {
    await start({
      rules: [
        { match: 'gone@example.com', action: 'reject' },
        { match: 'full@example.com', action: 'reject', code: 552, status: '5.2.2', text: 'mailbox full' },
        { match: '/^spam.*@example\\.com$/i', action: 'reject', code: 554, status: '5.7.1', text: 'policy' },
        { match: 'old@example.com', action: 'reject', code: 550 },
      ],
    });
    const cases: Array<[string, number, string]> = [
      ['gone@example.com', 550, '550 5.1.1 user unknown'],
      ['full@example.com', 552, '552 5.2.2 mailbox full'],
      ['SPAMMY@example.com', 554, '554 5.7.1 policy'], // not smtp-server's own 5.6.0 for 554
      ['old@example.com', 550, '550 mailbox unavailable'], // a code without a status: no enhanced code
    ];
    for (const [to, code, response] of cases) {
      const error = await refusal({ to });
      assert.equal(error.responseCode, code, to);
      assert.equal(error.response, response, to);
    }
    assert.deepEqual(sink!.received(), []);
    assert.deepEqual(sink!.stats().recipients, { accepted: 0, deferred: 0, rejected: 4 });
    assert.deepEqual(
      sink!.rules().map((rule) => [rule.reply, rule.used]),
      [
        ['550 5.1.1 user unknown', 1],
        ['552 5.2.2 mailbox full', 1],
        ['554 5.7.1 policy', 1],
        ['550 mailbox unavailable', 1],
      ],
    );
  });

  it(
    'delivers to the recipients it accepts when it rejects others of the same message; the first matching rule ' +
      'decides',
    async () => {
      await start({
        rules: [
          { match: 'vip@example.com', action: 'accept' },
          { match: '/@example\\.com$/', action: 'reject', code: 550, status: '5.1.1' },
        ],
      });
      const info = await send({ to: ['vip@example.com', 'gone@example.com', 'ada@elsewhere.example'] });
      assert.deepEqual(info.accepted, ['vip@example.com', 'ada@elsewhere.example']);
      assert.deepEqual(info.rejected, ['gone@example.com']);
      assert.deepEqual(
        sink!.received().map((m) => m.to),
        [['vip@example.com', 'ada@elsewhere.example']],
      );
    },
  );

  it(
    'answers the end of the data for an at: data rule, refusing the whole message, and deferring it the given ' +
      'times',
    async () => {
      await start({
        rules: [
          {
            match: 'filtered@example.com',
            action: 'reject',
            code: 554,
            status: '5.7.1',
            text: 'message content rejected',
            at: 'data',
          },
          { match: 'later@example.com', action: 'defer', times: 1, at: 'data' },
        ],
      });
      const refused = await refusal({ to: ['ada@example.com', 'filtered@example.com'] });
      assert.equal(refused.code, 'EMESSAGE', 'refused after the data, not at RCPT TO');
      assert.equal(refused.response, '554 5.7.1 message content rejected');
      const deferred = await refusal({ to: 'later@example.com' });
      assert.equal(deferred.code, 'EMESSAGE');
      assert.equal(deferred.response, '451 4.3.0 try again later');
      await send({ to: 'later@example.com' });
      await send({ to: 'ada@example.com' });
      assert.deepEqual(
        sink!.received().map((m) => m.to),
        [['later@example.com'], ['ada@example.com']],
      );
      const stats = sink!.stats();
      assert.deepEqual([stats.messages.accepted, stats.messages.deferred, stats.messages.refused], [2, 1, 1]);
      assert.deepEqual(stats.recipients, { accepted: 5, deferred: 0, rejected: 0 });
    },
  );

  it('refuses malformed rules, changing nothing', async () => {
    await start({ rules: [{ match: 'a@example.com', action: 'reject' }] });
    const bad = [
      [{ match: 'x@example.com', action: 'reject', code: 250 }, /code must be from 400 to 599/],
      [{ match: 'x@example.com', action: 'defer', code: 550 }, /code must be from 400 to 499/],
      [{ match: 'x@example.com', action: 'reject', code: 550, status: '4.1.1' }, /not of the class of code 550/],
      [{ match: 'x@example.com', action: 'reject', status: '5.1' }, /enhanced status code/],
      [{ match: 'x@example.com', action: 'reject', text: 'two\r\nlines' }, /one line/],
      [{ match: 'x@example.com', action: 'defer', times: 0 }, /at least 1/],
      [{ match: '/(/', action: 'reject' }, /not a valid regular expression/],
      [{ match: '', action: 'reject' }, /match must be/],
      [{ match: 'x@example.com', action: 'bounce' }, /action must be/],
      [{ match: 'x@example.com', action: 'reject', at: 'end' }, /at must be rcpt or data/],
    ] as const;
    for (const [rule, message] of bad) {
      assert.throws(
        () => sink!.setRules([rule as never]),
        (error: Error) => error instanceof RangeError && message.test(error.message),
      );
    }
    assert.deepEqual(
      sink!.rules().map((rule) => rule.match),
      ['a@example.com'],
    );
  });

  it('changes the rules at run time over HTTP', async () => {
    await start();
    await send({ to: 'ada@example.com' });
    const put = await control('PUT', '/rules', {
      rules: [
        { match: 'ada@example.com', action: 'reject', code: 552, status: '5.2.2', text: 'mailbox full' },
        { match: '/^bob@/', action: 'defer', times: 3 },
      ],
    });
    assert.equal(put.status, 200);
    assert.deepEqual(put.body.rules, [
      { match: 'ada@example.com', action: 'reject', at: 'rcpt', reply: '552 5.2.2 mailbox full', used: 0 },
      { match: '/^bob@/', action: 'defer', at: 'rcpt', times: 3, reply: '451 4.3.0 try again later', used: 0 },
    ]);
    assert.equal((await refusal({ to: 'ada@example.com' })).response, '552 5.2.2 mailbox full');
    assert.equal((await refusal({ to: 'bob@example.com' })).responseCode, 451);
    assert.deepEqual(
      (await control('GET', '/rules')).body.rules.map((rule: { used: number }) => rule.used),
      [1, 1],
    );

    const refused = await control('PUT', '/rules', {
      rules: [{ match: 'ada@example.com', action: 'reject', code: 600 }],
    });
    assert.equal(refused.status, 400);
    assert.match(refused.body.error, /^rule 1: a reject rule's code must be from 400 to 599/);
    assert.equal((await control('PUT', '/rules', { rules: 'none' })).status, 400);
    assert.equal((await control('GET', '/rules')).body.rules.length, 2, 'a refused PUT changes nothing');

    assert.deepEqual((await control('PUT', '/rules', { rules: [] })).body, { rules: [] });
    await send({ to: 'ada@example.com' });
    assert.equal(sink!.received().length, 2);
  });
});

describe('faults', () => {
  it(
    'drops the connection without an answer after N accepted messages, once; later messages go through on new ' +
      'connections',
    async () => {
      await start({ dropAfter: 2 });
      await send({ to: 'a@example.com' });
      await send({ to: 'b@example.com' });
      const error = await refusal({ to: 'c@example.com' });
      assert.match(String(error.code), /^(ECONNECTION|ESOCKET)$/);
      assert.equal(error.responseCode, undefined, 'no SMTP answer was given');
      for (const to of ['d@example.com', 'e@example.com', 'f@example.com']) await send({ to });
      assert.deepEqual(
        sink!.received().map((m) => m.to[0]),
        ['a@example.com', 'b@example.com', 'd@example.com', 'e@example.com', 'f@example.com'],
      );
      assert.equal(sink!.stats().messages.dropped, 1);
    },
  );

  it('drops every N with dropRepeat, and takes new faults over HTTP', async () => {
    await start();
    const put = await control('PUT', '/faults', { dropAfter: 1, dropRepeat: true });
    assert.deepEqual(put.body, { dropAfter: 1, dropRepeat: true, delayMs: 0 });
    const outcomes: string[] = [];
    for (const to of ['a@example.com', 'b@example.com', 'c@example.com', 'd@example.com']) {
      outcomes.push(
        await send({ to }).then(
          () => 'sent',
          () => 'dropped',
        ),
      );
    }
    assert.deepEqual(outcomes, ['sent', 'dropped', 'sent', 'dropped']);
    assert.equal((await control('PUT', '/faults', { dropAfter: -1 })).status, 400);
    assert.deepEqual((await control('GET', '/faults')).body, { dropAfter: 1, dropRepeat: true, delayMs: 0 });
  });

  it('drops a pooled connection mid-batch; the pool reconnects for the rest', async () => {
    await start({ dropAfter: 3 });
    const transport = createTransport({ host: '127.0.0.1', port: sink!.port, pool: true, maxConnections: 1 });
    const results = await Promise.allSettled(
      ['a', 'b', 'c', 'd', 'e', 'f'].map((name) => transport.sendMail({ ...MAIL, to: `${name}@example.com` })),
    );
    transport.close();
    assert.deepEqual(
      results.map((result) => result.status),
      ['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled'],
    );
    assert.deepEqual(
      sink!.received().map((m) => m.to[0]),
      ['a@example.com', 'b@example.com', 'c@example.com', 'e@example.com', 'f@example.com'],
    );
    assert.ok(sink!.stats().connections.opened >= 2);
  });

  it('answers each message after delayMs', async () => {
    await start({ delayMs: 600 });
    const began = performance.now();
    await send({ to: 'ada@example.com' });
    assert.ok(performance.now() - began >= 600);
    sink!.setFaults({ delayMs: 0 });
    const again = performance.now();
    await send({ to: 'ada@example.com' });
    assert.ok(performance.now() - again < 600);
  });
});

describe('reports', () => {
  // A second sink stands in for Herald's inbound listener: what the first sends it is kept to read.
  let inbound: SmtpSink | undefined;
  afterEach(async () => {
    await inbound?.close();
    inbound = undefined;
  });
  const VERP = 'bounces+ab12@bounce.example';
  const withReturnPath = (to: string | string[]) => ({ to, envelope: { from: VERP, to } });

  it(
    'sends a DSN about a message it took from the null sender ' + 'to its return path, and answers what it sent',
    async () => {
      inbound = await startSmtpSink({ httpPort: null });
      await start();
      await send(withReturnPath('bob@example.com'));
      const info = await send(withReturnPath('ada@example.com'));
      const diagnostic = '550 5.1.1 <ada@example.com>: user unknown';
      const sent = await control('POST', '/reports', {
        kind: 'dsn',
        to: 'ADA@example.com',
        diagnostic,
        host: '127.0.0.1',
        port: inbound.port,
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const { raw, ...answer } = sent.body;
      assert.deepEqual(answer, {
        kind: 'dsn',
        id: 2,
        messageId: info.messageId,
        recipient: 'ada@example.com',
        envelope: { from: '', to: VERP },
        host: '127.0.0.1',
        port: inbound.port,
        reply: '250 OK: queued as 1',
      });
      const [dsn] = inbound.received();
      assert.deepEqual([dsn.from, dsn.to], ['', [VERP]]);
      assert.equal(dsn.raw.toString('utf8'), raw);
      assert.deepEqual(await parseMailReport(dsn.raw), {
        kind: 'dsn',
        failures: [
          {
            action: 'failed',
            finalRecipient: 'ada@example.com',
            status: '5.1.1',
            diagnosticCode: `smtp; ${diagnostic}`,
          },
        ],
        original: { returnPath: null, messageId: info.messageId },
      });

      // By Message-ID, brackets or none, a delay quoting the head only.
      const delayed = await sink!.report({
        kind: 'dsn',
        messageId: info.messageId.slice(1, -1),
        status: '4.2.2',
        action: 'delayed',
        headersOnly: true,
        host: '127.0.0.1',
        port: inbound.port,
      });
      assert.equal(delayed.recipient, 'ada@example.com');
      const report = await parseMailReport(inbound.received()[1].raw);
      assert.deepEqual(report.kind === 'dsn' && report.failures.map((f) => [f.action, f.status]), [
        ['delayed', '4.2.2'],
      ]);
      assert.match(delayed.raw, /Content-Type: text\/rfc822-headers/);
    },
  );

  it(
    'sends an ARF report to the feedback mailbox at the return ' + 'path’s domain, to the reportTo destination',
    async () => {
      inbound = await startSmtpSink({ httpPort: null });
      await start({ reportTo: { host: '127.0.0.1', port: inbound.port } });
      const info = await send(withReturnPath('ada@example.com'));
      const sent = await control('POST', '/reports', { kind: 'arf', messageId: info.messageId, feedbackType: 'fraud' });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      assert.deepEqual(
        [sent.body.envelope, sent.body.port],
        [{ from: 'fbl@fbl.sink.localhost', to: 'fbl@bounce.example' }, inbound.port],
      );
      const [arf] = inbound.received();
      assert.deepEqual([arf.from, arf.to], ['fbl@fbl.sink.localhost', ['fbl@bounce.example']]);
      assert.deepEqual(await parseMailReport(arf.raw), {
        kind: 'arf',
        feedbackType: 'fraud',
        original: { returnPath: VERP, messageId: info.messageId },
      });
    },
  );

  it(
    'answers 404 for no such message, 400 for a bad request, ' + '502 when the destination refuses or is gone',
    async () => {
      inbound = await startSmtpSink({
        httpPort: null,
        rules: [{ match: VERP, action: 'reject', code: 550, status: '5.1.1', text: 'no such mailbox' }],
      });
      await start({ reportTo: { host: '127.0.0.1', port: inbound.port } });
      await send(withReturnPath(['ada@example.com', 'bob@example.com']));
      await send({ to: 'null@example.com', envelope: { from: '', to: ['null@example.com'] } });

      const missing = await control('POST', '/reports', { kind: 'dsn', to: 'cy@example.com' });
      assert.deepEqual(
        [missing.status, missing.body],
        [404, { error: 'no message received with recipient cy@example.com' }],
      );
      assert.equal(
        (await control('POST', '/reports', { kind: 'arf', messageId: '<nobody@example.com>', to: 'ada@example.com' }))
          .status,
        404,
      );
      await assert.rejects(sink!.report({ kind: 'dsn', messageId: 'nobody@example.com' }), NotReceived);

      const bad: Array<[unknown, RegExp]> = [
        [{ kind: 'bounce', to: 'ada@example.com' }, /kind must be dsn or arf/],
        [{ kind: 'dsn' }, /name the message/],
        [
          { kind: 'dsn', to: 'ada@example.com', status: '2.0.0' },
          /status must be an enhanced status code of class 4 or 5/,
        ],
        [{ kind: 'dsn', to: 'ada@example.com', action: 'delivered' }, /action must be failed or delayed/],
        [{ kind: 'dsn', to: 'ada@example.com', diagnostic: 'two\r\nlines' }, /diagnostic must be one line/],
        [{ kind: 'dsn', to: 'ada@example.com', feedbackType: 'abuse' }, /feedbackType is not a field of a dsn request/],
        [{ kind: 'arf', to: 'ada@example.com', status: '5.1.1' }, /status is not a field of an arf request/],
        [{ kind: 'arf', to: 'ada@example.com', feedbackType: 'spam' }, /feedbackType must be one of abuse/],
        [{ kind: 'arf', to: 'ada@example.com', headersOnly: 'yes' }, /headersOnly must be true or false/],
        [{ kind: 'arf', to: 'ada@example.com', host: '127.0.0.1' }, /port must be a whole number from 1 to 65535/],
        [{ kind: 'arf', to: 'ada@example.com', port: 25 }, /host must be a non-empty string/],
        [{ kind: 'arf', to: 12 }, /to must be one line/],
        [
          {
            kind: 'dsn',
            messageId: sink!
              .received()[0]
              .raw.toString()
              .match(/Message-ID: <([^>]+)>/i)![1],
          },
          /went to 2 recipients: name the one reported on with to/,
        ],
        [{ kind: 'dsn', to: 'null@example.com' }, /came from the null sender/],
      ];
      for (const [body, message] of bad) {
        const answer = await control('POST', '/reports', body);
        assert.equal(answer.status, 400, JSON.stringify(body));
        assert.match(answer.body.error, message, JSON.stringify(body));
      }
      assert.equal((await control('POST', '/reports', [1])).status, 400);
      assert.deepEqual(inbound.received(), [], 'nothing sent for a bad request');

      const refused = await control('POST', '/reports', { kind: 'dsn', to: 'bob@example.com' });
      assert.deepEqual([refused.status, refused.body.reply], [502, '550 5.1.1 no such mailbox']);
      assert.match(refused.body.error, /^127\.0\.0\.1:\d+ did not take the report: 550 5\.1\.1 no such mailbox$/);
      const port = inbound.port;
      await inbound.close();
      inbound = undefined;
      const gone = await control('POST', '/reports', { kind: 'arf', to: 'bob@example.com' });
      assert.deepEqual([gone.status, gone.body.reply], [502, null]);
      assert.match(gone.body.error, new RegExp(`^127\\.0\\.0\\.1:${port} did not take the report: .*ECONNREFUSED`));
      await assert.rejects(sink!.report({ kind: 'arf', to: 'bob@example.com' }), ReportRefused);
    },
  );

  it('needs a destination: a request without host and port to a sink started without reportTo is refused', async () => {
    await start();
    await send(withReturnPath('ada@example.com'));
    const answer = await control('POST', '/reports', { kind: 'dsn', to: 'ada@example.com' });
    assert.equal(answer.status, 400);
    assert.match(answer.body.error, /no host and port to send the report to/);
    await assert.rejects(startSmtpSink({ reportTo: { host: '127.0.0.1', port: 70000 } }), RangeError);
  });
});

/**
 * A throwaway self-signed certificate for 127.0.0.1 made for this run (openssl); its directory is
 * removed at the end.
 */
const dir = mkdtempSync(join(tmpdir(), 'herald-smtp-sink-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const certPath = join(dir, 'cert.pem');
const keyPath = join(dir, 'key.pem');
execFileSync(
  'openssl',
  [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    keyPath,
    '-out',
    certPath,
    '-days',
    '1',
    '-subj',
    '/CN=herald-test-smtp',
    '-addext',
    'subjectAltName=IP:127.0.0.1,DNS:localhost',
  ],
  { stdio: 'ignore' },
);
const tls = { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8') };

describe('STARTTLS and AUTH', () => {
  it('offers STARTTLS with a certificate; a client that requires it delivers over TLS', async () => {
    await start({ tls });
    await send({ to: 'ada@example.com' }, { requireTLS: true, tls: { ca: tls.cert } });
    assert.equal(sink!.received()[0].tls, true);
    assert.equal((await control('GET', '/messages')).body.messages[0].tls, true);
  });

  it('offers no STARTTLS without a certificate, so a client that requires it gives up', async () => {
    await start();
    await assert.rejects(send({ to: 'ada@example.com' }, { requireTLS: true }), /STARTTLS/);
    assert.deepEqual(sink!.received(), []);
  });

  it('checks the configured user and password, and requires AUTH before MAIL', async () => {
    await start({ user: 'herald', password: 'secret' });
    await send({ to: 'ada@example.com' }, { auth: { user: 'herald', pass: 'secret' } });
    const wrong = await refusal({ to: 'ada@example.com' }, { auth: { user: 'herald', pass: 'guess' } });
    assert.equal(wrong.code, 'EAUTH');
    assert.equal(wrong.responseCode, 535);
    const none = await refusal({ to: 'ada@example.com' });
    assert.equal(none.responseCode, 530);
    assert.equal(sink!.received().length, 1);
    assert.deepEqual(sink!.stats().auth, { accepted: 1, refused: 1 });
  });

  it('accepts any AUTH, or none, when no user is configured', async () => {
    await start();
    await send({ to: 'ada@example.com' }, { auth: { user: 'anyone', pass: 'anything' } });
    await send({ to: 'bob@example.com' });
    assert.equal(sink!.received().length, 2);
  });
});

describe('herald sim smtp', () => {
  it(
    'runs the sink with the rules given on the command line ' + 'until SIGTERM, sending reports to --report-to',
    async () => {
      const inbound = await start({ httpPort: null });
      const child = spawn(HERALD, [
        'sim',
        'smtp',
        '--port',
        '0',
        '--http-port',
        '0',
        '--user',
        'herald',
        '--password',
        'secret',
        '--tls-cert',
        certPath,
        '--tls-key',
        keyPath,
        '--report-to',
        `127.0.0.1:${inbound.port}`,
        '--accept',
        'vip@bounce.example',
        '--reject',
        '/@bounce\\.example$/:550:5.1.1:no such user',
        '--defer',
        'slow@example.com:1',
        '--reject-data',
        'spam@example.com:554:5.7.1',
        '--retain',
        '10',
      ]);
      const exited = once(child, 'exit');
      try {
        const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
        const [, port, httpPort] =
          /^SMTP sink: SMTP with STARTTLS on 127\.0\.0\.1:(\d+), control on http:\/\/127\.0\.0\.1:(\d+)/.exec(line)!;
        const transport = createTransport({
          host: '127.0.0.1',
          port: Number(port),
          requireTLS: true,
          tls: { ca: tls.cert },
          auth: { user: 'herald', pass: 'secret' },
        });
        const refused = await transport.sendMail({ ...MAIL, to: 'ada@bounce.example' }).then(
          () => undefined,
          (error: SendError) => error,
        );
        assert.equal(refused?.response, '550 5.1.1 no such user');
        await transport.sendMail({ ...MAIL, to: 'vip@bounce.example' });
        const deferred = await transport.sendMail({ ...MAIL, to: 'slow@example.com' }).then(
          () => undefined,
          (error: SendError) => error,
        );
        assert.equal(deferred?.response, '451 4.3.0 try again later');
        await transport.sendMail({ ...MAIL, to: 'slow@example.com' });
        const filtered = await transport.sendMail({ ...MAIL, to: 'spam@example.com' }).then(
          () => undefined,
          (error: SendError) => error,
        );
        assert.deepEqual([filtered?.code, filtered?.response], ['EMESSAGE', '554 5.7.1 transaction failed']);

        const { messages } = await (await fetch(`http://127.0.0.1:${httpPort}/messages`)).json();
        assert.deepEqual(
          messages.map((m: { to: string[]; tls: boolean }) => [m.to, m.tls]),
          [
            [['vip@bounce.example'], true],
            [['slow@example.com'], true],
          ],
        );
        const stats = await (await fetch(`http://127.0.0.1:${httpPort}/stats`)).json();
        assert.deepEqual(stats.recipients, { accepted: 3, deferred: 1, rejected: 1 });
        assert.equal(stats.messages.refused, 1);

        const reported = await fetch(`http://127.0.0.1:${httpPort}/reports`, {
          method: 'POST',
          body: JSON.stringify({ kind: 'dsn', to: 'vip@bounce.example' }),
        });
        assert.equal(reported.status, 200);
        assert.deepEqual(
          inbound.received().map((m) => [m.from, m.to]),
          [['', ['news@shop.example']]],
        );
      } finally {
        child.kill('SIGTERM');
      }
      const [code] = await exited;
      assert.equal(code, 0);
    },
  );

  it('documents its options in --help and refuses a malformed rule as a usage error', () => {
    const help = spawnSync(HERALD, ['sim', 'smtp', '--help'], { encoding: 'utf8' });
    assert.equal(help.status, 0);
    for (const option of [
      '--port 2525',
      '--http-port 2526',
      '--user',
      '--tls-cert',
      '--accept MATCH',
      '--defer MATCH:TIMES',
      '--reject MATCH',
      '--defer-data',
      '--reject-data',
      '--drop-after N',
      '--drop-repeat',
      '--delay-ms',
      '--retain',
      '--max-size',
      '--report-to HOST:PORT',
      'POST /reports',
    ]) {
      assert.ok(help.stdout.includes(option), option);
    }
    assert.match(spawnSync(HERALD, ['sim', '--help'], { encoding: 'utf8' }).stdout, /sim smsc[\s\S]*sim smtp/);

    const bad = spawnSync(
      HERALD,
      ['sim', 'smtp', '--port', '0', '--http-port', '0', '--reject', 'ada@example.com:550:4.1.1'],
      { encoding: 'utf8' },
    );
    assert.equal(bad.status, 1);
    assert.match(
      bad.stderr,
      /^herald: rule 1: status 4\.1\.1 is not of the class of code 550\n\nusage: herald sim smtp /,
    );
    for (const [reportTo, message] of [
      ['localhost', /^herald: --report-to must be HOST:PORT, not "localhost"\n/],
      ['127.0.0.1:0', /^herald: port must be a whole number from 1 to 65535, not 0\n/],
    ] as const) {
      const refused = spawnSync(HERALD, ['sim', 'smtp', '--port', '0', '--http-port', '0', '--report-to', reportTo], {
        encoding: 'utf8',
      });
      assert.equal(refused.status, 1);
      assert.match(refused.stderr, message);
    }
    const unknown = spawnSync(HERALD, ['sim', 'smtp', '--bounce'], { encoding: 'utf8' });
    assert.match(unknown.stderr, /^herald: Unknown option '--bounce'/);
  });
});
