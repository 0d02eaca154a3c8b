import assert from 'node:assert/strict';
import { createSecretKey, randomBytes } from 'node:crypto';
import { it } from 'node:test';
import { readMailbox, returnPath, trackingKey, unsubscribeMailbox } from '../../src/email/tracking.ts';
import { clickTokens, readTrackingToken, trackingToken } from '../../src/email/tracking-tokens.ts';
import { Keyring } from '../../src/sealed.ts';

// The addresses Herald receives mail at (VERP return paths, List-Unsubscribe's mailto:): no database.
const newKey = () => createSecretKey(randomBytes(32));
const keys = trackingKey(new Keyring(newKey()));

it(
  'names its recipient in a return path and an unsubscribe ' + 'address, in a local part mail systems may lower-case',
  () => {
    const bounce = returnPath(keys, 'bounce.example', 12345678901);
    const unsubscribe = unsubscribeMailbox(keys, 'bounce.example', 42);
    assert.match(bounce, /^bounces\+[0-9a-f]{50}@bounce\.example$/);
    assert.ok(unsubscribe.split('@')[0].length <= 64, 'a local part holds at most 64 characters (RFC 5321)');
    assert.deepEqual(readMailbox(keys, bounce), { kind: 'bounce', recipientId: 12345678901 });
    assert.deepEqual(readMailbox(keys, bounce.toUpperCase()), { kind: 'bounce', recipientId: 12345678901 });
    assert.deepEqual(readMailbox(keys, unsubscribe), { kind: 'unsubscribe', recipientId: 42 });
  },
);

it('reads nothing from an altered, cut, swapped or foreign token', () => {
  const bounce = returnPath(keys, 'bounce.example', 7);
  const [local, domain] = bounce.split('@');
  const token = local.slice('bounces+'.length);
  const flipped = token.slice(0, 20) + (token[20] === '0' ? '1' : '0') + token.slice(21);
  assert.equal(readMailbox(keys, `bounces+${flipped}@${domain}`), null, 'altered');
  assert.equal(readMailbox(keys, `bounces+${token.slice(0, -2)}@${domain}`), null, 'cut');
  assert.equal(readMailbox(keys, `bounces+${token}0@${domain}`), null, 'a hex digit too many');
  assert.equal(readMailbox(keys, `unsubscribe+${token}@${domain}`), null, 'a bounce token is no unsubscribe request');
  assert.equal(readMailbox(trackingKey(new Keyring(newKey())), bounce), null, 'made under another key');
  assert.equal(readMailbox(keys, 'postmaster@bounce.example'), null);
});

it('reads a token made under a key ENCRYPTION_KEY replaced', () => {
  const old = new Keyring(newKey());
  const bounce = returnPath(trackingKey(old), 'bounce.example', 9);
  const ring = trackingKey(new Keyring(newKey(), [old.current]));
  assert.deepEqual(readMailbox(ring, bounce), { kind: 'bounce', recipientId: 9 });
});

it(
  'makes a recipient’s click tokens with one HMAC: each link’s verifies as that link’s, and a token of another ' +
    'recipient or kind does not verify',
  () => {
    const key = keys.current;
    const click = clickTokens(key, 77);
    for (const link of [0, 1, 49])
      assert.deepEqual(readTrackingToken(key, click(link)), { recipientId: 77, kind: 'click', link });
    assert.equal(click(3), trackingToken(key, { recipientId: 77, kind: 'click', link: 3 }));
    const bytes = Buffer.from(click(0), 'base64url');
    bytes.writeBigUInt64BE(78n, 1);
    assert.equal(readTrackingToken(key, bytes.toString('base64url')), null, 'another recipient');
    bytes.writeBigUInt64BE(77n, 1);
    bytes.writeUInt8(1, 0);
    assert.equal(readTrackingToken(key, bytes.toString('base64url')), null, 'another kind');
  },
);
