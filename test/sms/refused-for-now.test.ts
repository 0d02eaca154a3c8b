import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { PageRow } from '../../src/messaging/pipeline.ts';
import { segment } from '../../src/sms/segments.ts';
import { pageOutcomes } from '../../src/sms/send.ts';
import type { OutgoingSms } from '../../src/sms/transport.ts';

// A message an SMSC refuses for now (ESME_RSYSERR, no bind) is tried again every 5 s: not for ever.

const HOUR = 3_600_000;
const row = (queuedAt: number): PageRow => ({
  id: 7,
  address: '447700900123',
  tags: null,
  properties: null,
  attempts: 0,
  deferred_at: null,
  message_id: null,
  updated_at: String(queuedAt),
});
const message: OutgoingSms = {
  accountId: 'a',
  sendId: 's',
  messageId: '00000000-0000-4000-8000-000000000007',
  recipient: '447700900123',
  sender: 'HERALD',
  segmented: segment('Your code is 1234', { reference: 7 }),
  sensitive: false,
};
const refusedForNow = { accepted: false as const, permanent: false, error: 'ESME_RSYSERR', errorCode: '0x00000008' };

it('tries a message refused for now again for 72 hours, then fails it saying so', () => {
  const now = 1_800_000_000_000;
  assert.deepEqual(pageOutcomes([row(now - 72 * HOUR + 1)], [message], [refusedForNow], now).outcomes, []);
  const [failed] = pageOutcomes([row(now - 72 * HOUR)], [message], [refusedForNow], now).outcomes;
  assert.equal(failed.status, 'Failed');
  assert.equal(failed.error, 'ESME_RSYSERR (refused for now for 72 hours)');
  assert.equal(failed.errorCode, '0x00000008');
});
