import assert from 'node:assert/strict';
import { it } from 'node:test';
import { recipientMessageId } from '../../src/messaging/message-ids.ts';

it('derives a recipient’s messageId as RFC 9562’s version 5 UUID of its row id in its send’s namespace', () => {
  // Python's uuid.uuid5(uuid.NAMESPACE_DNS, '42'): another implementation of the same RFC.
  assert.equal(recipientMessageId('6ba7b810-9dad-11d1-80b4-00c04fd430c8', 42), '7c411b5e-9d3f-50b5-9c28-62096e41c4ed');
  const send = 'a3f1c2d4-5b6e-4f70-8a91-b2c3d4e5f607';
  assert.equal(recipientMessageId(send, 7), recipientMessageId(send, 7));
  assert.notEqual(recipientMessageId(send, 7), recipientMessageId(send, 8));
  assert.notEqual(recipientMessageId(send, 7), recipientMessageId('b3f1c2d4-5b6e-4f70-8a91-b2c3d4e5f607', 7));
});
