import { compile as compileHtmlToText } from 'html-to-text';
import { Parser } from 'htmlparser2';
import { encode as encodeQuotedPrintable } from 'nodemailer/lib/qp';
import { compileTemplate, type Template } from '../messaging/tags.ts';
import {
  escapeHtml,
  lineBreaks,
  FIXED_SLOTS,
  OPEN,
  PREHEADER,
  UNSUBSCRIBE,
  type CompiledEmail,
  type EmailContent,
  type Skeleton,
} from './render.ts';
import { MAX_TRACKED_LINKS } from './tracking-tokens.ts';

/**
 * One email of a batch, compiled once: everything that does not depend on the recipient is
 * done here, the HTML parsed, its links found, the text/plain alternative converted, both cut
 * into static pieces and holes, so rendering it for a recipient (render.ts's renderEmail) is
 * joins and the MIME composer.
 *
 * The HTML is kept as written, byte for byte, but for:
 * - tags (`[name]`, the SMS rules and code, messaging/tags.ts) in text and attribute values,
 *   filled HTML-escaped: a contact's value is text, never markup. Tags are not looked for in
 *   `<style>`, `<script>` and comments, where brackets are CSS attribute selectors
 *   (`a[x-apple-data-detectors]`) and Outlook's conditional comments (`<!--[if mso]>`);
 * - `[unsubscribeUrl]`, written exactly so, anywhere a tag is: the recipient's unsubscribe URL
 *   (a request's own tag of that name is not used). HTML without it gets a footer with an
 *   unsubscribe link at the end of the body, since every message must carry one (RFC 8058 §4,
 *   and the senders' requirements of Gmail and Yahoo), but with `unsubscribe: false` (a Verify
 *   code: a login code is not marketing, and an unsubscribe would refuse the next code);
 * - with tracking, the `href` of each `<a>` that is an absolute http(s) URL without a tag,
 *   which becomes the recipient's click URL. A URL holding a tag (`?id=[contactId]`) is filled
 *   for each recipient and not tracked: a click token names one of the batch's links, and that
 *   link would differ per recipient. mailto:, tel: and anchors are left alone. A URL written
 *   several times is one link;
 * - the preheader, the body's first element, hidden; and with tracking the open pixel, its
 *   last. An HTML fragment with no `<body>` gets them at its start and end.
 * Start tags with a tracked link or a tag in an attribute are written again from their parsed
 * attributes, double-quoted.
 *
 * The text/plain alternative is html-to-text's reading of the same HTML, holes included, made
 * once per batch: headings keep their case, table cells are read as blocks (email layouts are
 * tables), images and the preheader are left out, links show their tracked URLs, and the
 * unsubscribe URL is always there.
 */

export const UNSUBSCRIBE_TAG = '[unsubscribeUrl]';

/**
 * What the body is cut into: static HTML, or a hole (a slot). `htmlOnly` parts (the preheader
 * and the pixel) are left out of the text alternative.
 */
type Part = { html: string; htmlOnly?: boolean } | { slot: number; htmlOnly?: boolean };

/** An edit of the source: the range [start, end) replaced by parts; an insertion when start = end. */
interface Edit {
  start: number;
  end: number;
  parts: Part[];
}

/**
 * Noncharacters, which Unicode reserves for a program's own use, mark the holes in the HTML
 * given to html-to-text: it keeps them (it drops the private-use area), and no email holds them.
 */
const HOLE_START = '\uFDD0';
const HOLE_END = '\uFDD1';
const HOLE = /\uFDD0(\d+)\uFDD1/g;

const htmlToText = compileHtmlToText({
  limits: { maxDepth: 200 },
  selectors: [
    ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((selector) => ({ selector, options: { uppercase: false } })),
    { selector: 'td', format: 'block' },
    { selector: 'th', format: 'block' },
    { selector: 'img', format: 'skip' },
  ],
});

const PREHEADER_STYLE =
  'display:none;max-height:0;max-width:0;overflow:hidden;mso-hide:all;' +
  'font-size:1px;line-height:1px;color:transparent;opacity:0';

/** Elements an email’s HTML may nest: real mail nests a few dozen; its text part reads 200 (render.ts). */
export const MAX_HTML_NESTING = 1000;

/**
 * Whether the HTML nests elements deeper than `levels`, read only as far as needed: the parser
 * keeps open elements in a list it shifts at each, so 260,000 nested cost it five minutes of
 * the event loop, which a send's compile (here) and dry run would spend.
 */
export function nestsDeeperThan(html: string, levels: number): boolean {
  let depth = 0;
  let deeper = false;
  const parser = new Parser({
    onopentag() {
      depth += 1;
      if (depth > levels && !deeper) {
        deeper = true;
        parser.pause();
      }
    },
    onclosetag() {
      depth -= 1;
    },
  });
  parser.end(html);
  return deeper;
}

export function compileEmail(
  content: EmailContent,
  options: { tracking: boolean; unsubscribe?: boolean },
): CompiledEmail {
  const unsubscribe = options.unsubscribe ?? true;
  const source = lineBreaks(content.html.replaceAll(HOLE_START, '').replaceAll(HOLE_END, ''));
  const tagSlots = new Map<string, number>();
  const links: string[] = [];
  const linkIndexes = new Map<string, number>();
  // Slots of links and the fixed ones are known only once the source is read: parts name them
  // by a negative placeholder, numbered below, turned into slots at the end.
  const linkPlaceholder = (index: number) => -1 - FIXED_SLOTS - index;
  const fixedPlaceholder = (fixed: number) => -1 - fixed;
  let unsubscribePlaced = false;

  const templateParts = (template: Template, escapeText: (text: string) => string): Part[] => {
    const parts: Part[] = [{ html: escapeText(template.pieces[0]) }];
    template.tags.forEach((tag, i) => {
      if (tag === UNSUBSCRIBE_TAG) {
        unsubscribePlaced = true;
        parts.push({ slot: fixedPlaceholder(UNSUBSCRIBE) });
      } else {
        if (!tagSlots.has(tag)) tagSlots.set(tag, tagSlots.size);
        parts.push({ slot: tagSlots.get(tag)! });
      }
      parts.push({ html: escapeText(template.pieces[i + 1]) });
    });
    return parts;
  };

  const edits: Edit[] = [];
  let text: { start: number; end: number } | null = null;
  let rawTextDepth = 0;
  let bodyStart: number | undefined;
  let bodyEnd: number | undefined;
  let fragmentStart = 0;
  const flushText = () => {
    if (!text) return;
    const template = compileTemplate(source.slice(text.start, text.end));
    if (template.tags.length > 0) edits.push({ ...text, parts: templateParts(template, (raw) => raw) });
    text = null;
  };

  const parser = new Parser(
    {
      onopentag(name, attributes) {
        flushText();
        const start = parser.startIndex;
        const end = parser.endIndex + 1;
        if (name === 'style' || name === 'script') rawTextDepth++;
        if (name === 'body' && bodyStart === undefined) bodyStart = end;
        if (name === 'html' || name === 'head') fragmentStart = Math.max(fragmentStart, end);
        const trackedHref = name === 'a' && options.tracking ? trackable(attributes.href) : undefined;
        // A link new past MAX_TRACKED_LINKS keeps its own URL: a click token has no room to name it.
        const href =
          trackedHref !== undefined && (linkIndexes.has(trackedHref) || links.length < MAX_TRACKED_LINKS)
            ? trackedHref
            : undefined;
        const templated = Object.values(attributes).some((value) => compileTemplate(value).tags.length > 0);
        if (href === undefined && !templated) return;
        const parts: Part[] = [{ html: `<${name}` }];
        for (const [attribute, value] of Object.entries(attributes)) {
          parts.push({ html: ` ${attribute}="` });
          if (attribute === 'href' && href !== undefined) {
            if (!linkIndexes.has(href)) linkIndexes.set(href, links.push(href) - 1);
            parts.push({ slot: linkPlaceholder(linkIndexes.get(href)!) });
          } else {
            parts.push(...templateParts(compileTemplate(value), escapeHtml));
          }
          parts.push({ html: '"' });
        }
        parts.push({ html: source.slice(start, end).endsWith('/>') ? ' />' : '>' });
        edits.push({ start, end, parts });
      },
      ontext() {
        if (rawTextDepth > 0) return;
        if (text && text.end === parser.startIndex) text.end = parser.endIndex + 1;
        else {
          flushText();
          text = { start: parser.startIndex, end: parser.endIndex + 1 };
        }
      },
      onclosetag(name, implied) {
        flushText();
        if (implied) return;
        if (name === 'style' || name === 'script') rawTextDepth = Math.max(0, rawTextDepth - 1);
        if (name === 'head') fragmentStart = Math.max(fragmentStart, parser.endIndex + 1);
        if (name === 'body') bodyEnd = parser.startIndex;
      },
      oncomment: () => flushText(),
      onprocessinginstruction(name) {
        // <!DOCTYPE html>: a fragment's preheader goes after it.
        if (name.toLowerCase() === '!doctype') fragmentStart = Math.max(fragmentStart, parser.endIndex + 1);
      },
    },
    { decodeEntities: true },
  );
  parser.end(source);
  flushText();

  const opening: Part[] = content.preheader
    ? [
        { html: `<div style="${PREHEADER_STYLE}">`, htmlOnly: true },
        { slot: fixedPlaceholder(PREHEADER), htmlOnly: true },
        { html: '</div>', htmlOnly: true },
      ]
    : [];
  const closing: Part[] = [];
  if (!unsubscribePlaced && unsubscribe) {
    closing.push(
      { html: '<p style="margin:24px 0 0;font-size:12px;line-height:18px;color:#6b7280;text-align:center"><a href="' },
      { slot: fixedPlaceholder(UNSUBSCRIBE) },
      { html: '" style="color:#6b7280">Unsubscribe</a></p>' },
    );
  }
  if (options.tracking) {
    closing.push(
      { html: '<img src="', htmlOnly: true },
      { slot: fixedPlaceholder(OPEN), htmlOnly: true },
      { html: '" width="1" height="1" alt="" style="display:block;border:0;width:1px;height:1px" />', htmlOnly: true },
    );
  }
  const openAt = bodyStart ?? fragmentStart;
  const closeAt = bodyEnd ?? source.length;
  edits.push({ start: openAt, end: openAt, parts: opening }, { start: closeAt, end: closeAt, parts: closing });
  // An insertion goes before an edit starting at the same place: the preheader before the body's first text.
  edits.sort((a, b) => a.start - b.start || a.end - a.start - (b.end - b.start));

  const parts: Part[] = [];
  let at = 0;
  for (const edit of edits) {
    parts.push({ html: source.slice(at, edit.start) }, ...edit.parts);
    at = edit.end;
  }
  parts.push({ html: source.slice(at) });

  const tags = [...tagSlots.keys()];
  const slotOf = (slot: number) => {
    if (slot >= 0) return slot;
    const fixed = -1 - slot;
    return fixed < FIXED_SLOTS ? tags.length + links.length + fixed : tags.length + (fixed - FIXED_SLOTS);
  };
  const html = skeleton(parts, slotOf);
  const textSource = parts
    .filter((part) => !part.htmlOnly)
    .map((part) => ('html' in part ? part.html : `${HOLE_START}${slotOf(part.slot)}${HOLE_END}`))
    .join('');
  const textPieces = htmlToText(textSource).split(HOLE);
  // The HTML's unsubscribe URL may sit where text has no place for it (an image's alt): the
  // text carries one anyway, which also means it is never empty (the composer cannot build an
  // empty part).
  const unsubscribeSlot = slotOf(fixedPlaceholder(UNSUBSCRIBE));
  if (unsubscribe && !textPieces.some((piece, i) => i % 2 === 1 && Number(piece) === unsubscribeSlot)) {
    const last = textPieces.pop()!.trimEnd();
    textPieces.push(`${last}${textPieces.length > 0 || last ? '\n\n' : ''}Unsubscribe: `, String(unsubscribeSlot), '');
  }
  return {
    links,
    unsubscribe,
    content: { from: content.from, replyTo: content.replyTo },
    subject: compileTemplate(content.subject),
    preheader: content.preheader ? compileTemplate(content.preheader) : null,
    tags,
    html,
    // split() with a capturing group alternates the text between holes and the holes' slots.
    text: textSkeleton(
      textPieces.filter((_, i) => i % 2 === 0),
      textPieces.filter((_, i) => i % 2 === 1).map(Number),
    ),
  };
}

/**
 * An http(s) URL with no tag in it, trimmed as browsers do; else undefined. One with a
 * character a Location header cannot carry (a space, `é`, `–`, an emoji) is written as a
 * browser follows it, percent-encoded (URL's `href`): the click's redirect would otherwise fail.
 */
function trackable(href: string | undefined): string | undefined {
  const url = href?.trim();
  if (!url || !/^https?:\/\/[^/?#\s]/i.test(url)) return undefined;
  if (compileTemplate(url).tags.length > 0) return undefined;
  return /[^\x21-\x7e]/.test(url) ? URL.parse(url)?.href : url;
}

function skeleton(parts: Part[], slotOf: (slot: number) => number): Skeleton {
  const pieces = [''];
  const slots: number[] = [];
  for (const part of parts) {
    if ('html' in part) pieces[pieces.length - 1] += part.html;
    else {
      slots.push(slotOf(part.slot));
      pieces.push('');
    }
  }
  return textSkeleton(pieces, slots);
}

const textSkeleton = (pieces: string[], slots: number[]): Skeleton => ({
  pieces,
  encoded: pieces.map(encodeQuotedPrintable),
  slots,
});
