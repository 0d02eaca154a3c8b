import assert from 'node:assert/strict';
import { it } from 'node:test';
import { MailHead } from '../../src/email/mail-head.ts';
import { REPORT_BYTES_READ } from '../../src/email/mail-reports.ts';

// The inbound listener's copy of a mail's head: no database.
it('keeps the first MiB of a mail in one buffer of its own, from chunks of a line each', () => {
  const head = new MailHead();
  // A mail of `.` lines: smtp-server hands on each unescaped `..` line as a chunk of its own.
  for (let line = 0; line < 400_000; line++) head.add(Buffer.from('.\r\n'));
  const bytes = head.bytes();
  assert.ok(bytes.equals(Buffer.alloc(REPORT_BYTES_READ, '.\r\n')));
  assert.equal(bytes.buffer.byteLength, REPORT_BYTES_READ, 'one buffer, no larger than what is read');
});

it('copies what it keeps: a chunk is not held, and one changed after leaves the head as it was', () => {
  const head = new MailHead();
  const chunk = Buffer.from('Subject: a report\r\n');
  head.add(chunk);
  head.add(Buffer.alloc(100 * 1024, 'x'));
  chunk.fill('?');
  assert.equal(head.bytes().subarray(0, 19).toString(), 'Subject: a report\r\n');
  assert.equal(head.bytes().length, 19 + 100 * 1024);
});
