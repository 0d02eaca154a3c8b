import assert from 'node:assert/strict';
import { it } from 'node:test';
import { generateKey, keyFromHex, Keyring, open, resealed, seal, SealedValueError } from '../src/sealed.ts';

const key = generateKey();
const ring = new Keyring(key);
const place = 'sends.content:3f1c2a9e-0000-4000-8000-000000000001';

it('opens what it sealed, any text, under its key and place; each seal differs', () => {
  for (const clear of ['', 'Your code is 739184', 'ж€😀\n[code]', 'x'.repeat(40_000)]) {
    const sealed = seal(key, clear, place);
    assert.match(sealed, /^v1:[A-Za-z0-9_-]+$/);
    assert.equal(open(ring, sealed, place), clear);
  }
  assert.notEqual(
    seal(key, 'Your code is 739184', place),
    seal(key, 'Your code is 739184', place),
    'a fresh IV each time',
  );
});

it('refuses to open under another key, for another place, altered, or not sealed at all', () => {
  const sealed = seal(key, 'Your code is 739184', place);
  const refused = (fn: () => unknown) =>
    assert.throws(fn, (error: unknown) => error instanceof SealedValueError && !String(error).includes('739184'));
  refused(() => open(new Keyring(generateKey()), sealed, place));
  // A place may name the person (a recipient's tags are sealed for their address): never told.
  assert.throws(
    () => open(ring, sealed, 'send_recipients.tags:3f1c2a9e:447911123456'),
    (error: unknown) =>
      error instanceof SealedValueError &&
      /of send_recipients\.tags does/.test(String(error)) &&
      !String(error).includes('447911123456'),
  );
  refused(() => open(ring, sealed, 'sends.content:3f1c2a9e-0000-4000-8000-000000000002'));
  const bytes = Buffer.from(sealed.slice(3), 'base64url');
  for (const at of [0, 12, 28, bytes.length - 1]) {
    const altered = Buffer.from(bytes);
    altered[at] ^= 1;
    refused(() => open(ring, `v1:${altered.toString('base64url')}`, place));
  }
  refused(() => open(ring, `v1:${bytes.subarray(0, 20).toString('base64url')}`, place));
  refused(() => open(ring, 'Your code is 739184', place));
  refused(() => open(ring, `v2:${sealed.slice(3)}`, place));
});

it(
  'opens, after ENCRYPTION_KEY is replaced, what the keys it ' + 'replaced sealed, and seals under the new one only',
  () => {
    const [older, old, current] = [generateKey(), generateKey(), generateKey()];
    const byOld = seal(old, 'sealed before', place);
    const byOlder = seal(older, 'sealed long before', place);
    const replaced = new Keyring(current, [old, older]);
    assert.equal(open(replaced, byOld, place), 'sealed before');
    assert.equal(open(replaced, byOlder, place), 'sealed long before');
    assert.equal(open(new Keyring(current), seal(replaced.current, 'sealed now', place), place), 'sealed now');
    assert.throws(
      () => open(new Keyring(current), byOld, place),
      SealedValueError,
      'a key dropped from the ring opens nothing it sealed',
    );

    const derived = replaced.derive('herald email tracking tokens');
    assert.equal(derived, replaced.derive('herald email tracking tokens'), 'derived once');
    assert.equal(derived.all.length, 3);
    assert.ok(
      derived.all[1].equals(new Keyring(old).derive('herald email tracking tokens').current),
      'each key derives what it derived alone',
    );
    assert.ok(!derived.current.equals(replaced.derive('another purpose').current));
  },
);

it('seals anew under the current key what an older key sealed; leaves what the current or no key sealed', () => {
  const [old, current] = [generateKey(), generateKey()];
  const replaced = new Keyring(current, [old]);
  const byOld = seal(old, 'kept for good', place);
  const again = resealed(replaced, byOld, place)!;
  assert.equal(open(new Keyring(current), again, place), 'kept for good', 'opens without the old key');
  assert.equal(resealed(replaced, again, place), undefined, 'already under the current key');
  assert.equal(resealed(replaced, seal(generateKey(), 'a lost key', place), place), undefined);
  assert.equal(resealed(replaced, byOld, 'another place'), undefined);
});

it('takes a key as exactly 64 hex characters', () => {
  const hex = 'a'.repeat(32) + 'F'.repeat(32);
  const fromHex = keyFromHex(hex)!;
  assert.equal(fromHex.export().toString('hex'), hex.toLowerCase());
  for (const bad of ['', 'a'.repeat(63), 'a'.repeat(65), 'g'.repeat(64), ` ${'a'.repeat(64)}`])
    assert.equal(keyFromHex(bad), undefined, bad);
});
