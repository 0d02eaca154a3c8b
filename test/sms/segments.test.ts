import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { measure, segment, MAX_PARTS, type Encoding, type Part } from '../../src/sms/segments.ts';

const GREEK_CAPITALS_IN_GSM = 'ΔΦΓΛΩΠΨΣΘΞ';
const EXTENSION_CHARACTERS = '€^{}[]~|\\';

interface Case {
  name: string;
  text: string;
  encoding: Encoding;
  units: number;
  /** Units of each part, in order. */
  parts: number[];
}

const cases: Case[] = [
  { name: 'plain ASCII', text: 'Your code is 123456. Do not share it.', encoding: 'GSM-7', units: 37, parts: [37] },
  { name: 'empty text: one empty part', text: '', encoding: 'GSM-7', units: 0, parts: [0] },
  { name: 'exactly 160 GSM characters: one part', text: 'a'.repeat(160), encoding: 'GSM-7', units: 160, parts: [160] },
  { name: '161 GSM characters: 153 + 8', text: 'a'.repeat(161), encoding: 'GSM-7', units: 161, parts: [153, 8] },
  {
    name: '306 GSM characters: two full parts',
    text: 'a'.repeat(306),
    encoding: 'GSM-7',
    units: 306,
    parts: [153, 153],
  },
  { name: 'exactly 70 UCS-2 characters: one part', text: 'ж'.repeat(70), encoding: 'UCS-2', units: 70, parts: [70] },
  { name: '71 UCS-2 characters: 67 + 4', text: 'ж'.repeat(71), encoding: 'UCS-2', units: 71, parts: [67, 4] },
  { name: 'an emoji is two code units', text: 'Thanks 😀', encoding: 'UCS-2', units: 9, parts: [9] },
  { name: '35 emoji are 70 code units: one part', text: '😀'.repeat(35), encoding: 'UCS-2', units: 70, parts: [70] },
  {
    name: 'an emoji that would straddle the 67-unit boundary moves whole to the next part',
    text: `${'a'.repeat(66)}😀${'b'.repeat(10)}`,
    encoding: 'UCS-2',
    units: 78,
    parts: [66, 12],
  },
  {
    name: 'an emoji ending exactly on the 67th unit stays',
    text: `${'a'.repeat(65)}😀${'b'.repeat(10)}`,
    encoding: 'UCS-2',
    units: 77,
    parts: [67, 10],
  },
  {
    name: 'extension characters count two septets each',
    text: EXTENSION_CHARACTERS,
    encoding: 'GSM-7',
    units: 18,
    parts: [18],
  },
  { name: 'form feed is an extension character', text: 'page\fbreak', encoding: 'GSM-7', units: 11, parts: [11] },
  { name: '80 euro signs are exactly 160 septets', text: '€'.repeat(80), encoding: 'GSM-7', units: 160, parts: [160] },
  {
    name: '81 euro signs: 76 (152 septets) + 5',
    text: '€'.repeat(81),
    encoding: 'GSM-7',
    units: 162,
    parts: [152, 10],
  },
  {
    name: 'an extension character on the 153rd/154th septet moves whole to the next part',
    text: `${'a'.repeat(152)}€${'b'.repeat(10)}`,
    encoding: 'GSM-7',
    units: 164,
    parts: [152, 12],
  },
  {
    name: 'an extension character ending exactly on the 153rd septet stays',
    text: `${'a'.repeat(151)}€${'b'.repeat(10)}`,
    encoding: 'GSM-7',
    units: 163,
    parts: [153, 10],
  },
  {
    name: 'Greek capitals of the GSM alphabet',
    text: GREEK_CAPITALS_IN_GSM,
    encoding: 'GSM-7',
    units: 10,
    parts: [10],
  },
  { name: 'lowercase Greek is not in GSM-7', text: 'καλημέρα', encoding: 'UCS-2', units: 8, parts: [8] },
  { name: 'Greek capitals outside the GSM alphabet', text: 'ΑΒΓ', encoding: 'UCS-2', units: 3, parts: [3] },
  // TS 23.038's Turkish shift tables would carry ş ğ ı in GSM-7; they are not used (gsm7.ts says why).
  {
    name: 'Turkish ş ğ ı: UCS-2 (national shift tables not used)',
    text: 'ş ğ ı',
    encoding: 'UCS-2',
    units: 5,
    parts: [5],
  },
  { name: 'Arabic', text: 'مرحبا بك', encoding: 'UCS-2', units: 8, parts: [8] },
  {
    name: 'GSM Latin accents: é ñ ü Ç ß Å',
    text: 'é ñ ü Ç ß Å £ ¥ § ¿ ¡ ¤ à',
    encoding: 'GSM-7',
    units: 25,
    parts: [25],
  },
  { name: 'lowercase ç is not in GSM-7 (only Ç is)', text: 'ça va', encoding: 'UCS-2', units: 5, parts: [5] },
  { name: 'a backtick is not in GSM-7', text: 'run `herald`', encoding: 'UCS-2', units: 12, parts: [12] },
  {
    name: 'a tab is not in GSM-7; line feed and carriage return are',
    text: 'a\tb',
    encoding: 'UCS-2',
    units: 3,
    parts: [3],
  },
  { name: 'line feed and carriage return', text: 'a\r\nb', encoding: 'GSM-7', units: 4, parts: [4] },
  {
    name: 'one UCS-2 character at the end makes the whole text UCS-2',
    text: `${'a'.repeat(200)}ş`,
    encoding: 'UCS-2',
    units: 201,
    parts: [67, 67, 67],
  },
];

describe('SMS segmentation', () => {
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(measure(c.text), { encoding: c.encoding, units: c.units, parts: c.parts.length });
      for (const packed of [false, true]) {
        const result = segment(c.text, { reference: 42, packed });
        assert.equal(result.encoding, c.encoding);
        assert.equal(result.units, c.units);
        assert.deepEqual(
          result.parts.map((part) => part.units),
          c.parts,
        );
        assert.equal(result.parts.map((part) => part.text).join(''), c.text, 'the parts reassemble the text');
        result.parts.forEach((part, index) => {
          assert.deepEqual(
            [...part.udh],
            c.parts.length === 1 ? [] : [0x05, 0x00, 0x03, 42, c.parts.length, index + 1],
          );
          assert.deepEqual([...part.shortMessage], [...part.udh, ...part.payload]);
          assert.equal(decode(c.encoding, part, packed), part.text, 'the payload carries the part text');
          // Unpacked GSM-7 spends a byte on each septet; the SMSC packs it into the 140.
          if (c.encoding === 'UCS-2' || packed) assert.ok(part.shortMessage.length <= 140, 'a part fits 140 octets');
        });
      }
    });
  }

  it('a body becomes UCS-2 only once a substituted value needs it: segment the rendered text', () => {
    const body = 'Dear [name], your appointment on Monday at 10:00 is confirmed. Reply STOP to opt out.';
    const render = (name: string) => body.replace('[name]', name);
    // The tag's brackets are extension characters: the template itself is 87 septets.
    assert.deepEqual(measure(body), { encoding: 'GSM-7', units: 87, parts: 1 });
    assert.deepEqual(measure(render('Anna')), { encoding: 'GSM-7', units: 83, parts: 1 });
    assert.deepEqual(measure(render('Şule')), { encoding: 'UCS-2', units: 83, parts: 2 });
  });

  describe('bytes', () => {
    const bytes = (hex: string) => [...Buffer.from(hex.replaceAll(' ', ''), 'hex')];
    const payload = (text: string, packed = false) => [...segment(text, { reference: 0, packed }).parts[0].payload];

    it('packs "hellohello" as the well-known E8 32 9B FD 46 97 D9 EC 37', () => {
      assert.deepEqual(payload('hellohello', true), bytes('E8 32 9B FD 46 97 D9 EC 37'));
    });

    it('unpacked GSM-7 is one septet a byte, with ESC 0x1B before an extension character', () => {
      assert.deepEqual(payload('hello'), bytes('68 65 6C 6C 6F'));
      assert.deepEqual(payload('@£$¥_Δ¤¡§à'), bytes('00 01 02 03 11 10 24 40 5F 7F'));
      assert.deepEqual(payload('€^{}\\[~]|\f'), bytes('1B65 1B14 1B28 1B29 1B2F 1B3C 1B3D 1B3E 1B40 1B0A'));
      assert.deepEqual(payload(GREEK_CAPITALS_IN_GSM), bytes('10 12 13 14 15 16 17 18 19 1A'));
    });

    it('UCS-2 is big-endian code units, an emoji its surrogate pair', () => {
      assert.deepEqual(payload('ş😀'), bytes('015F D83D DE00'));
    });

    it('a concatenated part carries 05 00 03 reference total sequence', () => {
      const { parts } = segment('a'.repeat(161), { reference: 0xab });
      assert.deepEqual([...parts[0].udh], bytes('05 00 03 AB 02 01'));
      assert.deepEqual([...parts[1].udh], bytes('05 00 03 AB 02 02'));
      assert.deepEqual([...parts[1].shortMessage], bytes('05 00 03 AB 02 02 61 61 61 61 61 61 61 61'));
    });

    it('packed septets after a UDH start on a septet boundary: one fill bit after the 48 UDH bits', () => {
      const { parts } = segment(`${'x'.repeat(153)}hellohello`, { reference: 7, packed: true });
      // "hellohello" shifted left by one bit across the octets, carried by hand from E8 32 9B …
      assert.deepEqual([...parts[1].shortMessage], bytes('05 00 03 07 02 02 D0 65 36 FB 8D 2E B3 D9 6F'));
      assert.equal(parts[1].units, 10);
      assert.equal(parts[0].payload.length, Math.ceil((1 + 153 * 7) / 8), 'a full packed part is 134 octets');
    });
  });

  describe('limits', () => {
    for (const reference of [-1, 256, 1.5, Number.NaN]) {
      it(`refuses the reference ${reference}`, () => {
        assert.throws(() => segment('hi', { reference }), RangeError);
      });
    }

    it(`numbers up to ${MAX_PARTS} parts and refuses more; measure counts them all`, () => {
      assert.equal(segment('a'.repeat(153 * MAX_PARTS), { reference: 1 }).parts.length, MAX_PARTS);
      const tooLong = 'a'.repeat(153 * MAX_PARTS + 1);
      assert.equal(measure(tooLong).parts, MAX_PARTS + 1);
      assert.throws(() => segment(tooLong, { reference: 1 }), /256 SMS parts, more than the 255/);
    });
  });
});

/** Reads a part's payload back to text, independently of the encoder's tables. */
function decode(encoding: Encoding, part: Part, packed: boolean): string {
  const { payload } = part;
  if (encoding === 'UCS-2') {
    let text = '';
    for (let i = 0; i < payload.length; i += 2) text += String.fromCharCode((payload[i] << 8) | payload[i + 1]);
    return text;
  }
  const septets = packed ? unpack(payload, part.udh.length > 0 ? 1 : 0, part.units) : [...payload];
  let text = '';
  for (let i = 0; i < septets.length; i++) {
    if (septets[i] === 0x1b) text += GSM_EXTENSION.get(septets[++i]) ?? '?';
    else text += GSM_DEFAULT[septets[i]];
  }
  return text;
}

function unpack(octets: Uint8Array, fillBits: number, count: number): number[] {
  const septets: number[] = [];
  for (let n = 0; n < count; n++) {
    const bit = fillBits + n * 7;
    const pair = octets[bit >> 3] | ((octets[(bit >> 3) + 1] ?? 0) << 8);
    septets.push((pair >> (bit & 7)) & 0x7f);
  }
  return septets;
}

// TS 23.038 §6.2.1, written out again here so the test does not trust the encoder's table.
const GSM_DEFAULT = [
  ...'@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ',
  '<ESC>',
  ...'ÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?',
  ...'¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà',
];
const GSM_EXTENSION = new Map([
  [0x0a, '\f'],
  [0x14, '^'],
  [0x28, '{'],
  [0x29, '}'],
  [0x2f, '\\'],
  [0x3c, '['],
  [0x3d, '~'],
  [0x3e, ']'],
  [0x40, '|'],
  [0x65, '€'],
]);
