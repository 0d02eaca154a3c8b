/** An identifier in clear and the keyed hash that replaces it. */
export interface Replacement {
  clear: string;
  hash: string;
}

/** Fields that hold a text sent to or by the person, emptied wherever the person is named beside them. */
const TEXTS = new Set(['text', 'reply', 'body']);

/**
 * A JSON document (a webhook body, a batch of events) rewritten to name the person by hash
 * only: a value equal to one of their identifiers becomes its hash, and a text beside it in
 * the same object goes; an identifier inside a longer string (an error's words) is replaced
 * there too.
 */
export function redactedJson(identifiers: { sms: Replacement[]; email: Replacement[] }): (json: string) => string {
  const all = [...identifiers.sms, ...identifiers.email];
  const hashOf = new Map(all.map((r) => [r.clear, r.hash]));
  const wholes = [
    ...identifiers.sms.map((r) => ({ pattern: wholeNumber(r.clear), hash: r.hash })),
    ...identifiers.email.map((r) => ({ pattern: wholeAddress(r.clear), hash: r.hash })),
  ];
  const inText = (value: string) => wholes.reduce((text, r) => text.replace(r.pattern, () => r.hash), value);
  const walk = (value: unknown): unknown => {
    if (typeof value === 'string') return hashOf.get(value) ?? inText(value);
    if (Array.isArray(value)) return value.map(walk);
    if (value === null || typeof value !== 'object') return value;
    const entries = Object.entries(value as Record<string, unknown>);
    const names = entries.some(([, v]) => typeof v === 'string' && hashOf.has(v));
    return Object.fromEntries(
      entries.map(([k, v]) => [k, names && TEXTS.has(k) && typeof v === 'string' ? '' : walk(v)]),
    );
  };
  return (json) => JSON.stringify(walk(JSON.parse(json)));
}

// An identifier where it stands whole in a text, not inside a longer one, which is another
// person's: 4791234567 inside 447912345678, bob@example.com inside jimbob@example.com or
// jim+bob@example.com. After an address, a dot ends a sentence unless a letter or digit follows.
const wholeNumber = (digits: string) => new RegExp(`(?<!\\d)${RegExp.escape(digits)}(?!\\d)`, 'g');
const wholeAddress = (address: string) =>
  new RegExp(`(?<![\\p{L}\\p{N}._%+-])${RegExp.escape(address)}(?![\\p{L}\\p{N}_%+-]|\\.[\\p{L}\\p{N}])`, 'gu');
