import type { FieldError } from '../errors.ts';

/**
 * Substitution tags (SPEC §2.3): `[name]` in a text is replaced by the recipient's own tag of
 * that tagName, else by the property of that name (case-insensitive) of the recipient's
 * contact, else by nothing, as SendGrid and Brevo do with an unknown tag: a `[name]` left in a
 * text the recipient reads is worse than a gap. A text is split at its tags once per send, so
 * rendering one recipient is a join.
 */
export interface Template {
  /** The text between tags: one more piece than tags. */
  pieces: string[];
  /** Each tag as written, brackets included. */
  tags: string[];
}

const TAG = /\[[^[\]\n]{1,64}\]/g;

export function compileTemplate(text: string): Template {
  const pieces: string[] = [];
  const tags: string[] = [];
  let at = 0;
  for (const match of text.matchAll(TAG)) {
    pieces.push(text.slice(at, match.index));
    tags.push(match[0]);
    at = match.index + match[0].length;
  }
  pieces.push(text.slice(at));
  return { pieces, tags };
}

/** The values a recipient's tags are filled from, in order. */
export interface TagSources {
  /** The request's own tags for this recipient, by tagName as written (`[name]`). */
  own?: Record<string, string> | null;
  /** The contact's properties by lower-cased name. */
  properties?: Map<string, string> | null;
}

/**
 * Tag uses a text may hold: each is filled per recipient with up to 10,000 characters (4,000 of
 * a contact property), so a body of many uses, each filled long, made one recipient's message
 * hundreds of megabytes (an email's render thread out of memory) or seconds of the worker's
 * event loop to segment (an SMS). Real templates use a handful.
 */
const MAX_TAG_USES = { sms: 30, email: 200 } as const;

/** Why a text uses too many tags for its channel, or undefined. */
export function tagsProblem(text: string, channel: keyof typeof MAX_TAG_USES): string | undefined {
  const most = MAX_TAG_USES[channel];
  return compileTemplate(text).tags.length > most ? `uses tags more than ${most} times` : undefined;
}

/** One tag's value for a recipient, the tag as written (`[name]`). */
export function tagValue(tag: string, sources: TagSources): string {
  return sources.own?.[tag] ?? sources.properties?.get(tag.slice(1, -1).toLowerCase()) ?? '';
}

export function renderTemplate(template: Template, sources: TagSources): string {
  if (template.tags.length === 0) return template.pieces[0];
  let text = template.pieces[0];
  for (let i = 0; i < template.tags.length; i++) text += tagValue(template.tags[i], sources) + template.pieces[i + 1];
  return text;
}

// A tag is found in a text by the rule of TAG above: 1 to 64 characters other than brackets
// and line breaks, between square brackets.
const TAG_NAME = /^\[[^[\]\n]{1,64}\]$/;

/**
 * A request's tags (SPEC §2.3) by tagName as written, each problem pushed to `errors` by field
 * path; each tagName once, so that which value a tag takes is never a guess. `reserved`: tag
 * names the service fills itself, each with the words that say so.
 */
export function checkTags(
  tags: Array<{ tagName: string; tagValue: string }> | undefined,
  path: string,
  errors: FieldError[],
  reserved: Record<string, string> = {},
): Record<string, string> {
  const values: Record<string, string> = {};
  const first = new Map<string, number>();
  tags?.forEach(({ tagName, tagValue }, i) => {
    const field = `${path}[${i}].tagName`;
    if (!TAG_NAME.test(tagName)) {
      errors.push({
        field,
        message: 'must be a name in square brackets, like [firstName]: 1 to 64 characters, none of them a bracket',
      });
    } else if (Object.hasOwn(reserved, tagName)) {
      errors.push({ field, message: reserved[tagName] });
    } else if (first.has(tagName)) {
      errors.push({ field, message: `repeats the tagName of ${path}[${first.get(tagName)}]` });
    } else {
      first.set(tagName, i);
      values[tagName] = tagValue;
    }
  });
  return values;
}
