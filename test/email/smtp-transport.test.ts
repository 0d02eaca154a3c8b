import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { smtpEmailTransport } from '../../src/email/transports/smtp.ts';
import { keptReply, type OutgoingEmail } from '../../src/email/transport.ts';
import { startSmtpSink, type SmtpSink } from '../../src/sim/smtp.ts';
import { parseSmtpUrl } from '../../src/email/transports/smtp-url.ts';
import { REDIS_URL, redisPrefix } from '../support/redis.ts';

describe('EMAIL_TRANSPORT=smtp://', () => {
  it('reads the relay, its credentials and settings, with the defaults', () => {
    assert.deepEqual(parseSmtpUrl('smtp://relay.example.com'), {
      implicitTls: false,
      requireTls: false,
      ca: undefined,
      host: 'relay.example.com',
      port: 587,
      auth: undefined,
      pool: 5,
      rate: 0,
    });
    const full = parseSmtpUrl('smtp://mailer:s%40cret@10.0.0.5:2525?pool=12&rate=300&tls=require');
    assert.deepEqual(
      [full.port, full.auth, full.pool, full.rate, full.requireTls],
      [2525, { user: 'mailer', password: 's@cret' }, 12, 300, true],
    );
    assert.deepEqual(
      [parseSmtpUrl('smtps://relay.example.com').implicitTls, parseSmtpUrl('smtps://relay.example.com').port],
      [true, 465],
    );
    assert.equal(loadConfig({ EMAIL_TRANSPORT: 'smtp://relay.example.com?pool=2' }).emailTransport.kind, 'smtp');
  });

  const bad: Array<[string, RegExp]> = [
    ['smtp://user:hunter2@', /must be a URL|must name the relay host/],
    ['smtp://user:hunter2@relay.example.com?pool=0', /pool must be a whole number from 1 to 100/],
    ['smtp://user:hunter2@relay.example.com?pool=many', /pool must be a whole number/],
    ['smtp://user:hunter2@relay.example.com?rate=-1', /rate must be a whole number from 0 to 100000/],
    ['smtp://user:hunter2@relay.example.com?tls=maybe', /tls must be starttls or require/],
    ['smtps://user:hunter2@relay.example.com?tls=require', /tls is for smtp:\/\//],
    ['smtp://user:hunter2@relay.example.com?timeout=5', /knows no parameter "timeout"/],
    ['smtp://user:hunter2@relay.example.com?ca=/nonexistent/ca.pem', /ca: cannot read/],
    ['smtp://:hunter2@relay.example.com', /names a password but no user/],
    ['smtp://user:hunter2@relay.example.com/path', /takes no path/],
  ];
  for (const [value, message] of bad) {
    it(`stops on ${value.replace('hunter2', '…')} with one clear error that never repeats the password`, () => {
      assert.throws(
        () => loadConfig({ EMAIL_TRANSPORT: value }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.variable === 'EMAIL_TRANSPORT' &&
          message.test(error.message) &&
          !error.message.includes('hunter2'),
      );
    });
  }
});

describe('the SMTP transport’s rate', () => {
  let sink: SmtpSink;
  before(async () => {
    sink = await startSmtpSink({ httpPort: null, retain: 0 });
  });
  after(() => sink.close());

  const message = (i: number): OutgoingEmail => ({
    accountId: 'a',
    sendId: 's',
    messageId: `m${i}`,
    from: 'bounces+00@mail.localhost',
    to: `r${i}@example.com`,
    raw: Buffer.from(`From: news@mail.localhost\r\nTo: r${i}@example.com\r\nSubject: rate\r\n\r\nhello\r\n`),
  });
  const sendAll = (transport: ReturnType<typeof smtpEmailTransport>, n: number) =>
    Promise.all(Array.from({ length: n }, (_, i) => transport.send(message(i), new AbortController().signal)));

  it('caps the messages a second of one process: 30 at 20/s take at least 1.3 s', async () => {
    const transport = smtpEmailTransport(parseSmtpUrl(`smtp://127.0.0.1:${sink.port}?rate=20`), {
      metrics: new Registry(),
    });
    try {
      const started = performance.now();
      const results = await sendAll(transport, 30);
      const seconds = (performance.now() - started) / 1000;
      assert.ok(results.every((r) => r.outcome === 'accepted'));
      // A tenth of a second's burst (2), then 20 a second: 28 more take 1.4 s.
      assert.ok(seconds >= 1.3, `30 messages at 20 a second took ${seconds.toFixed(2)} s`);
    } finally {
      await transport.close();
    }
  });

  it('shares the cap between processes through Redis: 40 at 20/s in all take at least 1.6 s', async () => {
    const { prefix, clean } = redisPrefix('smtp-rate');
    const settings = parseSmtpUrl(`smtp://127.0.0.1:${sink.port}?rate=20`);
    const transports = [0, 1].map(() =>
      smtpEmailTransport(settings, { metrics: new Registry(), redisUrl: REDIS_URL, rateKeyPrefix: prefix }),
    );
    try {
      const started = performance.now();
      await Promise.all(transports.map((transport) => sendAll(transport, 20)));
      const seconds = (performance.now() - started) / 1000;
      // 40 messages at 20 a second in all: each process alone would take about 1 s for its 20.
      assert.ok(seconds >= 1.6, `two processes sent 40 messages at 20 a second in all in ${seconds.toFixed(2)} s`);
    } finally {
      await Promise.all(transports.map((transport) => transport.close()));
      await clean();
    }
  });
});

describe('what the SMTP transport tells the operator of its relay', () => {
  const message: OutgoingEmail = {
    accountId: 'a',
    sendId: 's',
    messageId: 'm',
    from: 'bounces+00@mail.localhost',
    to: 'ada@example.com',
    raw: Buffer.from('From: news@mail.localhost\r\nTo: ada@example.com\r\nSubject: hi\r\n\r\nhello\r\n'),
  };
  const send = (transport: ReturnType<typeof smtpEmailTransport>) =>
    transport.send(message, new AbortController().signal);
  const capture = () => {
    const lines: Array<{ level: string; fields: Record<string, unknown>; message: string }> = [];
    const at = (level: string) => (fields: object, message: string) =>
      void lines.push({ level, fields: fields as Record<string, unknown>, message });
    return { lines, log: { info: at('info'), warn: at('warn'), error: at('error') } };
  };

  it('logs an error once, naming the relay and never the password, when the relay refuses its login', async () => {
    const sink = await startSmtpSink({ httpPort: null, retain: 0, user: 'mailer', password: 'right-password' });
    const { lines, log } = capture();
    const settings = parseSmtpUrl(`smtp://mailer:hunter2@127.0.0.1:${sink.port}?pool=1`);
    const transport = smtpEmailTransport(settings, { metrics: new Registry(), log });
    try {
      for (let i = 0; i < 3; i++) assert.equal((await send(transport)).outcome, 'deferred');
      const told = lines.filter((line) => line.level !== 'info');
      assert.deepEqual(
        told.map((line) => [line.level, line.fields.relay]),
        [['error', `127.0.0.1:${sink.port}`]],
      );
      assert.match(told[0].message, /refused the session/);
      assert.match(String(told[0].fields.reply), /535/);
      assert.ok(!JSON.stringify(lines).includes('hunter2'));
    } finally {
      await transport.close();
      await sink.close();
    }
  });

  it('defers, and logs the refused session, when the relay needs a login EMAIL_TRANSPORT lacks (530)', async () => {
    const sink = await startSmtpSink({ httpPort: null, retain: 0, user: 'mailer', password: 'right-password' });
    const { lines, log } = capture();
    const url = parseSmtpUrl(`smtp://127.0.0.1:${sink.port}?pool=1`);
    const transport = smtpEmailTransport(url, { metrics: new Registry(), log });
    try {
      assert.equal((await send(transport)).outcome, 'deferred');
      assert.match(lines.find((line) => line.level === 'error')?.message ?? '', /refused the session/);
    } finally {
      await transport.close();
      await sink.close();
    }
  });

  it('warns once when the relay keeps failing, and again when it answers', async () => {
    const sink = await startSmtpSink({ httpPort: null, retain: 0 });
    const port = sink.port;
    await sink.close();
    const { lines, log } = capture();
    const settings = parseSmtpUrl(`smtp://127.0.0.1:${port}?pool=1`);
    const transport = smtpEmailTransport(settings, { metrics: new Registry(), log });
    let back: SmtpSink | undefined;
    try {
      for (let i = 0; i < 5; i++) assert.equal((await send(transport)).outcome, 'deferred');
      back = await startSmtpSink({ port, httpPort: null, retain: 0 });
      assert.equal((await send(transport)).outcome, 'accepted');
      assert.deepEqual(
        lines.map((line) => [line.level, line.message, line.fields.relay, line.fields.failures]),
        [
          ['warn', 'the SMTP relay keeps failing: messages are deferred until it answers', `127.0.0.1:${port}`, 3],
          ['warn', 'the SMTP relay answers again', `127.0.0.1:${port}`, 5],
        ],
      );
    } finally {
      await transport.close();
      await back?.close();
    }
  });
});

/**
 * A relay written by hand (smtp-server cleans its replies, and answers in time): every command
 * answered 250 at once, and the end of each message handed to `answer`, with its session's
 * number from 1, to answer as the test's relay would.
 */
async function handWrittenRelay(answer: (socket: Socket, session: number) => void) {
  let sessions = 0;
  const relay = createServer((socket) => {
    const session = ++sessions;
    let data = false;
    let buffered = '';
    socket.on('error', () => {});
    socket.write('220 relay ready\r\n');
    socket.on('data', (chunk: Buffer) => {
      if (socket.writableEnded) return;
      buffered += chunk.toString('latin1');
      if (data) {
        if (!buffered.includes('\r\n.\r\n')) return;
        data = false;
        buffered = '';
        answer(socket, session);
        return;
      }
      for (let end = buffered.indexOf('\r\n'); end >= 0; end = buffered.indexOf('\r\n')) {
        const line = buffered.slice(0, end).toUpperCase();
        buffered = buffered.slice(end + 2);
        if (line.startsWith('EHLO')) socket.write('250 relay\r\n');
        else if (line.startsWith('DATA')) {
          data = true;
          socket.write('354 go on\r\n');
          return;
        } else if (line.startsWith('QUIT')) socket.end('221 bye\r\n');
        else socket.write('250 ok\r\n');
      }
    });
  });
  relay.listen(0, '127.0.0.1');
  await once(relay, 'listening');
  return { url: `smtp://127.0.0.1:${(relay.address() as AddressInfo).port}`, close: () => relay.close() };
}

const oneMessage = {
  accountId: 'a',
  sendId: 's',
  messageId: 'm',
  from: 'bounces+00@mail.localhost',
  to: 'r@example.com',
  raw: Buffer.from('From: news@mail.localhost\r\nTo: r@example.com\r\nSubject: x\r\n\r\nhello\r\n'),
};

describe('what the SMTP transport keeps of a reply', () => {
  it('keeps a reply with a NUL as one line of text, a space in its place', async () => {
    // Its 250 carries a NUL, which PostgreSQL's text refuses: a page's record would fail and
    // send the page again.
    const relay = await handWrittenRelay((socket) => socket.write('250 queued as a\u0000b\r\n'));
    const transport = smtpEmailTransport(parseSmtpUrl(relay.url), { metrics: new Registry() });
    try {
      const result = await transport.send(oneMessage, new AbortController().signal);
      assert.equal(result.outcome, 'accepted');
      assert.equal(result.reply, '250 queued as a b');
    } finally {
      await transport.close();
      relay.close();
    }
  });

  it('keeps a relay’s garbled answer to a message as one line of text within 1,000 characters', async () => {
    // After the message, an answer that is no SMTP reply, with a NUL.
    const relay = await handWrittenRelay((socket) => socket.end(`abc \u0000 oops ${'x'.repeat(5000)}\r\n`));
    const transport = smtpEmailTransport(parseSmtpUrl(relay.url), { metrics: new Registry() });
    try {
      const result = await transport.send(oneMessage, new AbortController().signal);
      assert.equal(result.outcome, 'deferred');
      assert.ok(result.reply.length <= 1000, `${result.reply.length} characters`);
      assert.ok(
        [...result.reply].every((c) => c.charCodeAt(0) >= 0x20),
        'no control character',
      );
    } finally {
      await transport.close();
      relay.close();
    }
  });

  it('defers a message the relay answers a byte at a time past its deadline, and sends the next', async () => {
    // The first session's answer to the message never ends (a line a tenth of a second, each
    // restarting the socket's timeout); later sessions answer at once.
    const relay = await handWrittenRelay((socket, session) => {
      if (session > 1) return void socket.write('250 queued\r\n');
      const timer = setInterval(() => socket.write('250-more\r\n'), 100);
      socket.on('close', () => clearInterval(timer));
    });
    const transport = smtpEmailTransport(parseSmtpUrl(relay.url), {
      metrics: new Registry(),
      timing: { message: 500 },
    });
    try {
      // The relay never ends its answer, so without the deadline this waits for good: 10 s (against
      // the 0.5 s deadline) spares a loaded machine's late timers and still fails it.
      const waited = new Promise((resolve) => setTimeout(resolve, 10_000, 'still waiting after 10 s').unref());
      const first = await Promise.race([transport.send(oneMessage, new AbortController().signal), waited]);
      assert.deepEqual(first, {
        outcome: 'deferred',
        reply: 'no answer from the relay: ETIMEDOUT the relay did not take the message within 0.5 s',
      });
      assert.equal((await transport.send(oneMessage, new AbortController().signal)).outcome, 'accepted');
    } finally {
      await transport.close();
      relay.close();
    }
  });

  it('keeps no more of a huge reply than the line it keeps: 50 of 2 MB hold under 20 MB', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    gc();
    const before = process.memoryUsage().heapUsed;
    const kept = Array.from({ length: 50 }, (_, i) => keptReply(`450-4.2.1 ${i} ${'B'.repeat(2 << 20)}`));
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    assert.ok(grown < 20 << 20, `the heap grew by ${grown} bytes`);
    assert.equal(kept[49], `450-4.2.1 49 ${'B'.repeat(1000 - 13)}`);
  });

  it('cuts a long reply between characters, never inside a surrogate pair PostgreSQL would refuse', () => {
    const kept = keptReply(`550 ${'x'.repeat(995)}\u{1F600} and more`);
    assert.ok(kept.isWellFormed(), 'no half of a pair');
    assert.equal(kept, `550 ${'x'.repeat(995)}`);
  });
});
