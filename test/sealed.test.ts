import assert from 'node:assert/strict';
import { it } from 'node:test';
import { open, seal, SealedValueError } from '../src/sealed.ts';
import { generateKey, keyFromHex } from '../src/secret-key.ts';

const key = generateKey();
const place = 'sends.content:3f1c2a9e-0000-4000-8000-000000000001';

it('opens what it sealed, any text, under its key and place; each seal differs', () => {
  for (const clear of ['', 'Your code is 739184', 'ж€😀\n[code]', 'x'.repeat(40_000)]) {
    const sealed = seal(key, clear, place);
    assert.match(sealed, /^v1:[A-Za-z0-9_-]+$/);
    assert.equal(open(key, sealed, place), clear);
  }
  assert.notEqual(seal(key, 'Your code is 739184', place), seal(key, 'Your code is 739184', place), 'a fresh IV each time');
});

it('refuses to open under another key, for another place, altered, or not sealed at all', () => {
  const sealed = seal(key, 'Your code is 739184', place);
  const refused = (fn: () => unknown) => assert.throws(fn, (error: unknown) => error instanceof SealedValueError && !String(error).includes('739184'));
  refused(() => open(generateKey(), sealed, place));
  refused(() => open(key, sealed, 'sends.content:3f1c2a9e-0000-4000-8000-000000000002'));
  const bytes = Buffer.from(sealed.slice(3), 'base64url');
  for (const at of [0, 12, 28, bytes.length - 1]) {
    const altered = Buffer.from(bytes);
    altered[at] ^= 1;
    refused(() => open(key, `v1:${altered.toString('base64url')}`, place));
  }
  refused(() => open(key, `v1:${bytes.subarray(0, 20).toString('base64url')}`, place));
  refused(() => open(key, 'Your code is 739184', place));
  refused(() => open(key, `v2:${sealed.slice(3)}`, place));
});

it('takes a key as exactly 64 hex characters', () => {
  const hex = 'a'.repeat(32) + 'F'.repeat(32);
  const fromHex = keyFromHex(hex)!;
  assert.equal(fromHex.export().toString('hex'), hex.toLowerCase());
  for (const bad of ['', 'a'.repeat(63), 'a'.repeat(65), 'g'.repeat(64), ` ${'a'.repeat(64)}`]) assert.equal(keyFromHex(bad), undefined, bad);
});
