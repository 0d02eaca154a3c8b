import assert from 'node:assert/strict';
import { it } from 'node:test';
import { readSeptets, unpackSeptets } from '../../src/sms/gsm7.ts';
import { segment } from '../../src/sms/segments.ts';

const TEXTS = ['', 'a', 'abcdefg', 'abcdefgh', 'Grüße {€} [1~2] \\ | ^ @£$¥', 'a'.repeat(160)];

it('reads back what segment() writes, unpacked and packed', () => {
  for (const text of TEXTS) {
    const [part] = segment(text, { reference: 0 }).parts;
    assert.equal(readSeptets(part.payload, 0, part.payload.length), text);
    const [packed] = segment(text, { reference: 0, packed: true }).parts;
    const septets = unpackSeptets(packed.payload);
    assert.equal(readSeptets(septets, 0, septets.length), text);
  }
});

it('drops the 7 spare bits of a last octet as padding, zero or CR', () => {
  // 7 septets fill 49 of 56 bits: the 8th "septet" is padding.
  const [part] = segment('abcdefg', { reference: 0, packed: true }).parts;
  assert.equal(unpackSeptets(part.payload).length, 7);
  const withCr = Uint8Array.from(part.payload);
  withCr[6] |= 0x0d << 1;
  assert.equal(readSeptets(unpackSeptets(withCr), 0, 7), 'abcdefg');
});

it('shows the default character for an unknown escape and U+FFFD for a byte that is no septet', () => {
  assert.equal(readSeptets(Uint8Array.of(0x1b, 0x41, 0x80), 0, 3), 'A\ufffd');
});
