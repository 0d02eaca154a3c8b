import assert from 'node:assert/strict';
import { it } from 'node:test';
import { redactedJson } from '../../src/privacy/redact.ts';

const redacted = redactedJson({
  sms: [{ clear: '4791234567', hash: 'erased:AAA' }],
  email: [{ clear: 'bob@example.com', hash: 'erased:BBB' }],
});

it('names the person by hash where their number or address stands whole, in a value or a text', () => {
  const body = {
    recipient: '4791234567',
    email: 'bob@example.com',
    error: 'bounce for <bob@example.com>: mailbox full. Retried +4791234567.',
    sentence: 'sent to bob@example.com.',
  };
  assert.deepEqual(JSON.parse(redacted(JSON.stringify(body))), {
    recipient: 'erased:AAA',
    email: 'erased:BBB',
    error: 'bounce for <erased:BBB>: mailbox full. Retried +erased:AAA.',
    sentence: 'sent to erased:BBB.',
  });
});

it("leaves other people's numbers and addresses that hold the person's inside them", () => {
  const others = {
    longer: '447912345678',
    before: 'jimbob@example.com',
    plus: 'jim+bob@example.com',
    dotted: 'x.bob@example.com',
    domain: 'bob@example.community',
    subdomain: 'bob@example.com.au',
  };
  assert.deepEqual(JSON.parse(redacted(JSON.stringify(others))), others);
});
