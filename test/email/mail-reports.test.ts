import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { it } from 'node:test';
import MailComposer from 'nodemailer/lib/mail-composer';
import { heraldMessageUuid } from '../../src/email/mail-reports.ts';
import { parseMailReport, ReportReader } from '../../src/email/report-reader.ts';
import { arfFor, dsnFor } from '../../src/sim/smtp-reports.ts';

// Reports as mailbox providers send them (built by the sink's builders), read back: no database.
const uuid = '0b7c6f1e-3f7a-4c1d-9a53-2f0d2b7f9e41';
const original = await new MailComposer({
  from: 'News <news@mail.localhost>',
  to: 'ada@example.com',
  subject: 'Spring sale',
  messageId: `<${uuid}@mail.localhost>`,
  text: 'Hello',
  html: '<p>Hello</p>',
})
  .compile()
  .build();
const verp = 'bounces+00aa@bounce.example';

it('reads a failed recipient of a DSN: its status, its diagnostic, and the original’s Message-ID', async () => {
  const raw = await dsnFor({
    original,
    recipient: 'ada@example.com',
    returnPath: verp,
    status: '5.1.1',
    diagnostic: '550 5.1.1 <ada@example.com>: Recipient address rejected: User unknown in virtual mailbox table',
  });
  assert.match(raw.toString(), /Content-Type: multipart\/report; report-type=delivery-status;/);
  assert.deepEqual(await parseMailReport(raw), {
    kind: 'dsn',
    failures: [
      {
        action: 'failed',
        finalRecipient: 'ada@example.com',
        status: '5.1.1',
        diagnosticCode:
          'smtp; 550 5.1.1 <ada@example.com>: Recipient address rejected: User unknown in virtual mailbox table',
      },
    ],
    original: { returnPath: null, messageId: `<${uuid}@mail.localhost>` },
  });
});

it('reads the recipients of a DSN up to the 50th, whatever follows them', async () => {
  const raw = (
    await dsnFor({ original, recipient: 'ada@example.com', returnPath: verp, status: '5.1.1', diagnostic: 'gone' })
  ).toString();
  const withGroups = (before: number, after: number) =>
    Buffer.from(
      raw.replace(
        /Final-Recipient:[\s\S]*?\r\n\r\n/,
        (group) => `${'X-Note: nothing\r\n\r\n'.repeat(before)}${group}${'X-Note: nothing\r\n\r\n'.repeat(after)}`,
      ),
    );
  const failed = async (message: Buffer) => {
    const report = await parseMailReport(message);
    return report.kind === 'dsn' ? report.failures.map((f) => f.finalRecipient) : report.kind;
  };
  assert.deepEqual(await failed(withGroups(49, 200_000)), ['ada@example.com']);
  assert.deepEqual(await failed(withGroups(50, 0)), []);
});

it('reads a delay as a delay, and a DSN carrying only the original’s head', async () => {
  const raw = await dsnFor({
    original,
    recipient: 'ada@example.com',
    returnPath: verp,
    status: '4.2.2',
    action: 'delayed',
    headersOnly: true,
  });
  assert.match(raw.toString(), /Content-Type: text\/rfc822-headers/);
  const report = await parseMailReport(raw);
  assert.equal(report.kind, 'dsn');
  assert.deepEqual(report.kind === 'dsn' && report.failures, [
    { action: 'delayed', finalRecipient: 'ada@example.com', status: '4.2.2', diagnosticCode: null },
  ]);
  assert.equal(report.kind === 'dsn' && report.original.messageId, `<${uuid}@mail.localhost>`);
});

it('reads an ARF report’s feedback type and the original’s return path, whole or by its head', async () => {
  for (const headersOnly of [false, true]) {
    const raw = await arfFor({
      original,
      recipient: 'ada@example.com',
      to: 'fbl@bounce.example',
      returnPath: verp,
      headersOnly,
    });
    assert.match(raw.toString(), /Content-Type: multipart\/report; report-type=feedback-report;/);
    assert.deepEqual(await parseMailReport(raw), {
      kind: 'arf',
      feedbackType: 'abuse',
      original: { returnPath: verp, messageId: `<${uuid}@mail.localhost>` },
    });
  }
  const redacted = await parseMailReport(
    await arfFor({ original, recipient: 'ada@example.com', to: 'fbl@bounce.example', feedbackType: 'not-spam' }),
  );
  assert.deepEqual(redacted, {
    kind: 'arf',
    feedbackType: 'not-spam',
    original: { returnPath: null, messageId: `<${uuid}@mail.localhost>` },
  });
});

it('reads a message that reports nothing as other, and bytes that are no message without throwing', async () => {
  assert.deepEqual(await parseMailReport(original), { kind: 'other' });
  assert.deepEqual(await parseMailReport(Buffer.from('I am out of the office until Monday.\r\n')), { kind: 'other' });
  const garbage = await parseMailReport(Buffer.from([0, 255, 13, 10, 13, 10, 0x2d, 0x2d, 0xff, 0xfe, 0, 0]));
  assert.ok(garbage.kind === 'other' || garbage.kind === 'unparseable', JSON.stringify(garbage));
  const broken = Buffer.from(
    'Content-Type: multipart/report; report-type=delivery-status; boundary=x\r\n\r\n--x\r\nContent-Type: ' +
      'message/delivery-status\r\n\r\nReporting-MTA: dns; x\r\n\r\nAction: exploded\r\nStatus: ' +
      'nine\r\n--x--\r\n',
  );
  assert.deepEqual(await parseMailReport(broken), {
    kind: 'dsn',
    failures: [],
    original: { returnPath: null, messageId: null },
  });
});

it('takes the uuid of Herald’s Message-IDs only', () => {
  assert.equal(heraldMessageUuid(`<${uuid.toUpperCase()}@mail.localhost>`), uuid);
  assert.equal(heraldMessageUuid('<CAF=abc@mail.gmail.com>'), null);
  assert.equal(heraldMessageUuid(null), null);
});

it('reads a feedback report of many line breaks, as a stranger may send one, in linear time', async () => {
  // Base64, so its part holds exactly these bytes: a break-ended block tried from each break was
  // quadratic (8.5 s for 110 KB; this one would take minutes).
  const report = Buffer.from(`Feedback-Type: abuse\r\n${'\n'.repeat(400_000)}x`).toString('base64');
  const raw = Buffer.from(
    'Content-Type: multipart/report; report-type=feedback-report; boundary=x\r\n\r\n--x\r\n' +
      'Content-Type: message/feedback-report\r\nContent-Transfer-Encoding: base64\r\n\r\n' +
      `${report.replace(/.{76}/g, '$&\r\n')}\r\n--x--\r\n`,
  );
  const started = performance.now();
  const parsed = await parseMailReport(raw);
  // 1.2 s seen on a loaded machine; quadratic, minutes.
  assert.ok(performance.now() - started < 20_000, `${Math.round(performance.now() - started)} ms`);
  assert.equal(parsed.kind, 'arf', JSON.stringify(parsed));
});

it('gives a mail nested deeper than any report up at once, as unparseable', async () => {
  let raw = 'Content-Type: multipart/mixed; boundary=b0\r\n\r\n';
  for (let depth = 1; depth < 200; depth++)
    raw += `--b${depth - 1}\r\nContent-Type: multipart/mixed; boundary=b${depth}\r\n\r\n`;
  const bomb = Buffer.from(raw + '--\r\n'.repeat(250_000));
  const started = performance.now();
  const parsed = await parseMailReport(bomb);
  assert.equal(parsed.kind, 'unparseable');
  assert.ok(performance.now() - started < 2_000, `${Math.round(performance.now() - started)} ms`);
});

const shortLines = (bytes: number) =>
  Buffer.concat([Buffer.from('Content-Type: text/plain\r\n\r\n'), Buffer.alloc(bytes - 28, 'ab\r\n')]);

it('reads three mails of 10 MB of short text lines at once, each by its head, within the reader’s heap', async () => {
  const mail = shortLines(10 * 1024 * 1024);
  const parsed = await Promise.all([1, 2, 3].map(() => parseMailReport(mail)));
  // Read whole, each took over 200 MB of heap: past the reader thread's 64 MB, it would end the thread
  // and be unparseable.
  assert.deepEqual(
    parsed.map((report) => report.kind),
    ['other', 'other', 'other'],
  );
});

it('gives a mail whose head runs past 64 KiB up at once, as unparseable', async () => {
  // Cut at the 1 MiB read, a megabyte of addresses was read as one header: 760 ms, 120 MB of heap.
  const addresses = Buffer.concat([Buffer.from('To: '), Buffer.alloc(2 * 1024 * 1024, 'a@b, ')]);
  const parsed = await parseMailReport(addresses);
  assert.deepEqual(parsed, { kind: 'unparseable', problem: 'Max header size for a MIME node exceeded' });
});

it('reads a DSN whose original’s head is past 64 KiB, without what that head would say', async () => {
  const received = Buffer.from(
    'Received: from relay.example by mx.example; Mon, 1 Dec 2026 10:00:00 +0000\r\n'.repeat(1_100),
  );
  const raw = await dsnFor({
    original: Buffer.concat([received, original]),
    recipient: 'ada@example.com',
    returnPath: verp,
    status: '5.1.1',
  });
  const report = await parseMailReport(raw);
  assert.equal(report.kind, 'dsn', JSON.stringify(report));
  assert.deepEqual(report.kind === 'dsn' && [report.failures.map((f) => f.status), report.original], [
    ['5.1.1'],
    { returnPath: null, messageId: null },
  ]);
});

it('reads reports off the event loop: it stays idle while ten mails of short lines are read', async () => {
  const mails = Array.from({ length: 10 }, () => shortLines(1024 * 1024));
  await parseMailReport(shortLines(1024));
  const before = performance.eventLoopUtilization();
  const parsed = await Promise.all(mails.map((mail) => parseMailReport(mail)));
  const busy = performance.eventLoopUtilization(before);
  assert.deepEqual(new Set(parsed.map((report) => report.kind)), new Set(['other']));
  // Read on the event loop, it was busy 0.9 of the time and held it 115 ms at a stretch.
  assert.ok(busy.utilization < 0.3, `the event loop busy ${busy.utilization.toFixed(2)} of the time`);
});

it('reads the mails queued behind one that ends the reader’s thread, on a new thread', async () => {
  const reader = new ReportReader({ maxOldGenerationSizeMb: 20, maxYoungGenerationSizeMb: 2 });
  try {
    const dsn = await dsnFor({ original, recipient: 'ada@example.com', returnPath: verp, status: '5.1.1' });
    const read = await Promise.all([dsn, shortLines(1024 * 1024), dsn, dsn].map((mail) => reader.read(mail)));
    assert.deepEqual(
      read.map((report) => report.kind),
      ['dsn', 'unparseable', 'dsn', 'dsn'],
    );
    assert.match((read[1] as { problem: string }).problem, /^the report reader (failed|ended)/);
    assert.deepEqual(await reader.read(dsn), read[0]);
  } finally {
    await reader.close();
  }
  assert.deepEqual(await reader.read(original), { kind: 'unparseable', problem: 'the report reader is closed' });
});
