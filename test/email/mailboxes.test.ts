import assert from 'node:assert/strict';
import { createHmac, createSecretKey, type KeyObject, randomBytes } from 'node:crypto';
import { it } from 'node:test';
import { readMailbox, returnPath, trackingKey, unsubscribeMailbox } from '../../src/email/tracking.ts';
import {
  clickTokens,
  type ReadToken,
  readTrackingToken,
  signedBy,
  trackingToken,
} from '../../src/email/tracking-tokens.ts';
import { Keyring } from '../../src/sealed.ts';

// The addresses Herald receives mail at (VERP return paths, List-Unsubscribe's mailto:) and the
// tokens they and the tracking URLs carry, as read and checked against a send: no database
// (test/email/tracking.test.ts and inbound.test.ts look them up).
const newKey = () => createSecretKey(randomBytes(32));
const keys = trackingKey(new Keyring(newKey()));
const sendId = '0190a2b4-0000-7000-8000-000000000001';
const otherSend = '0190a2b4-0000-7000-8000-000000000002';

const namedBy = (address: string) => {
  const read = readMailbox(address);
  return read && { kind: read.kind, recipientId: read.token.recipientId };
};
const signs = (key: KeyObject, token: ReadToken | null | undefined, send: string) =>
  token ? signedBy(key, token, send) : null;

it(
  'names its recipient in a return path and an unsubscribe ' + 'address, in a local part mail systems may lower-case',
  () => {
    const bounce = returnPath(keys, 'bounce.example', { recipientId: 12345678901, sendId });
    const unsubscribe = unsubscribeMailbox(keys, 'bounce.example', { recipientId: 42, sendId });
    assert.match(bounce, /^bounces\+[0-9a-f]{50}@bounce\.example$/);
    assert.ok(unsubscribe.split('@')[0].length <= 64, 'a local part holds at most 64 characters (RFC 5321)');
    assert.deepEqual(namedBy(bounce), { kind: 'bounce', recipientId: 12345678901 });
    assert.deepEqual(namedBy(bounce.toUpperCase()), { kind: 'bounce', recipientId: 12345678901 });
    assert.deepEqual(namedBy(unsubscribe), { kind: 'unsubscribe', recipientId: 42 });
    assert.equal(signs(keys.current, readMailbox(bounce.toUpperCase())?.token, sendId), true);
    assert.equal(signs(keys.current, readMailbox(unsubscribe)?.token, sendId), true);
  },
);

it('signs the recipient’s send: a token does not check for the same row id in another send', () => {
  const bounce = readMailbox(returnPath(keys, 'bounce.example', { recipientId: 7, sendId }))!.token;
  assert.equal(bounce.bound, true);
  assert.equal(signedBy(keys.current, bounce, sendId), true);
  assert.equal(signedBy(keys.current, bounce, otherSend), false);
  const open = readTrackingToken(trackingToken(keys.current, { recipientId: 7, sendId, kind: 'open' }))!;
  assert.equal(signedBy(keys.current, open, sendId), true);
  assert.equal(signedBy(keys.current, open, otherSend), false);
});

it('reads nothing from a cut, swapped or overlong token, and an altered or foreign one does not check', () => {
  const bounce = returnPath(keys, 'bounce.example', { recipientId: 7, sendId });
  const [local, domain] = bounce.split('@');
  const token = local.slice('bounces+'.length);
  const flipped = token.slice(0, 30) + (token[30] === '0' ? '1' : '0') + token.slice(31);
  assert.equal(signs(keys.current, readMailbox(`bounces+${flipped}@${domain}`)?.token, sendId), false, 'altered');
  assert.equal(readMailbox(`bounces+${token.slice(0, -2)}@${domain}`), null, 'cut');
  assert.equal(readMailbox(`bounces+${token}0@${domain}`), null, 'a hex digit too many');
  assert.equal(readMailbox(`unsubscribe+${token}@${domain}`), null, 'a bounce token is no unsubscribe request');
  assert.equal(signs(trackingKey(new Keyring(newKey())).current, readMailbox(bounce)?.token, sendId), false);
  assert.equal(readMailbox('postmaster@bounce.example'), null);
  const beyond = Buffer.from(token, 'hex');
  beyond.writeBigUInt64BE(2n ** 63n, 1);
  assert.equal(readMailbox(`bounces+${beyond.toString('hex')}@${domain}`), null, 'an id no row can have');
});

it('checks a token made under a key ENCRYPTION_KEY replaced', () => {
  const old = new Keyring(newKey());
  const bounce = returnPath(trackingKey(old), 'bounce.example', { recipientId: 9, sendId });
  const ring = trackingKey(new Keyring(newKey(), [old.current]));
  assert.equal(signs(ring.current, readMailbox(bounce)?.token, sendId), false);
  assert.equal(
    ring.all.some((key) => signs(key, readMailbox(bounce)?.token, sendId)),
    true,
  );
});

it('reads a token made before tokens signed their send, which checks for any send', () => {
  // The earlier form: the kind's index alone in the first byte, the tag over it and the id.
  const head = Buffer.alloc(9);
  head.writeUInt8(2, 0);
  head.writeBigUInt64BE(42n, 1);
  const tag = createHmac('sha256', keys.current).update(head).digest().subarray(0, 16);
  const read = readMailbox(`unsubscribe+${Buffer.concat([head, tag]).toString('hex')}@bounce.example`)!;
  assert.deepEqual(
    { kind: read.kind, recipientId: read.token.recipientId, bound: read.token.bound },
    {
      kind: 'unsubscribe',
      recipientId: 42,
      bound: false,
    },
  );
  assert.equal(signedBy(keys.current, read.token, sendId), true);
  assert.equal(signedBy(keys.current, read.token, otherSend), true);
});

it(
  'makes a recipient’s click tokens with one HMAC: each link’s checks as that link’s, and a token of another ' +
    'recipient or kind does not check',
  () => {
    const key = keys.current;
    const click = clickTokens(key, { recipientId: 77, sendId });
    for (const link of [0, 1, 49]) {
      const read = readTrackingToken(click(link))!;
      assert.deepEqual([read.kind, read.recipientId, read.link], ['click', 77, link]);
      assert.equal(signedBy(key, read, sendId), true);
    }
    assert.equal(click(3), trackingToken(key, { recipientId: 77, sendId, kind: 'click', link: 3 }));
    const bytes = Buffer.from(click(0), 'base64url');
    bytes.writeBigUInt64BE(78n, 1);
    assert.equal(signs(key, readTrackingToken(bytes.toString('base64url')), sendId), false, 'another recipient');
    bytes.writeBigUInt64BE(77n, 1);
    bytes.writeUInt8(bytes[0] + 1, 0);
    assert.equal(readTrackingToken(bytes.toString('base64url')), null, 'another kind, of another length');
  },
);
