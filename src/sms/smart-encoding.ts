import { septetsOf } from './gsm7.ts';
import { measure } from './segments.ts';

/**
 * Smart encoding (ARCHITECTURE.md, "Preflight"): a text pasted from a word processor carries
 * typographic look-alikes of GSM-7 characters — one curly apostrophe turns a 160-character
 * GSM-7 text into three UCS-2 parts. Each look-alike becomes its GSM-7 form (zero-width ones
 * go), but only when the whole text then is GSM-7, in no more parts: a text with a character of
 * no GSM-7 form (an emoji, Cyrillic) goes unchanged as UCS-2, its quotes as written.
 */
const LOOK_ALIKES: ReadonlyMap<string, string> = new Map([
  // Quotation marks and primes, single and double.
  ['\u2018', "'"], // left single quotation mark
  ['\u2019', "'"], // right single quotation mark, the typographic apostrophe
  ['\u201A', "'"], // single low-9 quotation mark
  ['\u201B', "'"], // single high-reversed-9 quotation mark
  ['\u2039', "'"], // single left-pointing angle quotation mark
  ['\u203A', "'"], // single right-pointing angle quotation mark
  ['\u2032', "'"], // prime
  ['\u2035', "'"], // reversed prime
  ['\u02BC', "'"], // modifier letter apostrophe
  ['\u00B4', "'"], // acute accent
  ['\u0060', "'"], // grave accent
  ['\u201C', '"'], // left double quotation mark
  ['\u201D', '"'], // right double quotation mark
  ['\u201E', '"'], // double low-9 quotation mark
  ['\u201F', '"'], // double high-reversed-9 quotation mark
  ['\u00AB', '"'], // left-pointing double angle quotation mark
  ['\u00BB', '"'], // right-pointing double angle quotation mark
  ['\u2033', '"'], // double prime
  ['\u2036', '"'], // reversed double prime
  // Dashes and the minus sign.
  ['\u2010', '-'], // hyphen
  ['\u2011', '-'], // non-breaking hyphen
  ['\u2012', '-'], // figure dash
  ['\u2013', '-'], // en dash
  ['\u2014', '-'], // em dash
  ['\u2015', '-'], // horizontal bar
  ['\u2212', '-'], // minus sign
  ['\uFE58', '-'], // small em dash
  ['\uFE63', '-'], // small hyphen-minus
  ['\uFF0D', '-'], // fullwidth hyphen-minus
  // The ellipsis.
  ['\u2026', '...'],
  // Spaces.
  ['\u00A0', ' '], // no-break space
  ['\u2000', ' '], // en quad
  ['\u2001', ' '], // em quad
  ['\u2002', ' '], // en space
  ['\u2003', ' '], // em space
  ['\u2004', ' '], // three-per-em space
  ['\u2005', ' '], // four-per-em space
  ['\u2006', ' '], // six-per-em space
  ['\u2007', ' '], // figure space
  ['\u2008', ' '], // punctuation space
  ['\u2009', ' '], // thin space
  ['\u200A', ' '], // hair space
  ['\u202F', ' '], // narrow no-break space
  ['\u205F', ' '], // medium mathematical space
  ['\u3000', ' '], // ideographic space
  ['\t', ' '], // tab: GSM-7 has none
  // Zero-width characters: removed.
  ['\u200B', ''], // zero width space
  ['\u200C', ''], // zero width non-joiner
  ['\u200D', ''], // zero width joiner
  ['\u2060', ''], // word joiner
  ['\uFEFF', ''], // zero width no-break space (byte order mark)
  ['\u00AD', ''], // soft hyphen
]);

/** The characters smart encoding replaces, with what each becomes: for its tests and the docs. */
export const SMART_ENCODING_TABLE = LOOK_ALIKES;

/**
 * `text` with its look-alikes in their GSM-7 forms when the whole of it is then GSM-7, and how
 * many characters were replaced (removed ones included); otherwise `text` as it is, and 0.
 */
export function smartEncoded(text: string): { text: string; replacedCharacters: number } {
  let replaced = 0;
  for (let i = 0; i < text.length; i++) {
    if (septetsOf(text.charCodeAt(i)) > 0) continue;
    if (!LOOK_ALIKES.has(text[i])) return { text, replacedCharacters: 0 };
    replaced++;
  }
  if (replaced === 0) return { text, replacedCharacters: 0 };
  let out = '';
  for (const char of text) out += LOOK_ALIKES.get(char) ?? char;
  // An ellipsis becomes three characters: a text of many in one UCS-2 part could take two in GSM-7.
  if (measure(out).parts > measure(text).parts) return { text, replacedCharacters: 0 };
  return { text: out, replacedCharacters: replaced };
}
