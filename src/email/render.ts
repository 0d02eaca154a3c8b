import MailComposer, { type Options as MailComposerOptions } from 'nodemailer/lib/mail-composer';
import { encodeWord, foldLines } from 'nodemailer/lib/mime-funcs';
import { encode as encodeQuotedPrintable, wrap as wrapQuotedPrintable } from 'nodemailer/lib/qp';
import { renderTemplate, tagValue, type TagSources, type Template } from '../messaging/tags.ts';

/**
 * A batch's email rendered for one recipient: renderEmail fills the pieces and holes that
 * compileEmail (compile.ts) made once per batch with the recipient's values, and composes
 * the MIME. The render threads (render-thread.ts) load this module and not compile.ts: its
 * HTML parser and html-to-text would only weigh on their heaps.
 */

export interface EmailParty {
  email: string;
  displayName?: string;
}

export interface EmailContent {
  subject: string;
  preheader?: string;
  html: string;
  from: EmailParty;
  replyTo?: EmailParty;
}

/** Static pieces with a hole between each two, filled from a recipient's values by slot. */
export interface Skeleton {
  pieces: string[];
  /** The pieces quoted-printable encoded, once per batch (see fillEncoded). */
  encoded: string[];
  slots: number[];
}

/** A batch's email as compileEmail leaves it for renderEmail. */
export interface CompiledEmail {
  /** The original URLs of the tracked links, by index: the index a click token names. */
  links: string[];
  /** Whether it carries an unsubscribe link and List-Unsubscribe (compileEmail: not a Verify code). */
  unsubscribe: boolean;
  content: Omit<EmailContent, 'html' | 'subject' | 'preheader'>;
  subject: Template;
  preheader: Template | null;
  /** The distinct tags of the body, in slot order: slots 0…tags.length-1. */
  tags: string[];
  html: Skeleton;
  text: Skeleton;
}

/**
 * The slots after the tags': each link's, then these. Fixed offsets from the end keep a
 * recipient's values one flat array.
 */
export const OPEN = 0;
export const UNSUBSCRIBE = 1;
export const PREHEADER = 2;
export const FIXED_SLOTS = 3;

/**
 * The skeleton filled, quoted-printable encoded (not yet wrapped): its pieces' encodings, made
 * once per batch, joined with the recipient's values encoded. Each encoded apart, whitespace
 * that ends a piece is written `=20` even where the whole would have kept it literal: as
 * valid, and decoded to the same text. Encoding the whole message for each recipient was
 * a quarter of rendering's CPU.
 */
function fillEncoded(skeleton: Skeleton, values: string[]): string {
  const encoded = new Map<number, string>();
  let out = skeleton.encoded[0];
  for (let i = 0; i < skeleton.slots.length; i++) {
    const slot = skeleton.slots[i];
    let value = encoded.get(slot);
    if (value === undefined) {
      value = encodeQuotedPrintable(values[slot]);
      encoded.set(slot, value);
    }
    out += value + skeleton.encoded[i + 1];
  }
  return out;
}

const HTML_SPECIAL = /[&<>"']/;
const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return HTML_SPECIAL.test(text) ? text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]) : text;
}

/** A recipient's tracking and unsubscribe URLs. */
export interface RecipientUrls {
  click(index: number): string;
  open: string;
  unsubscribe: string;
  /** `mailto:…`, when inbound mail is on (ARCHITECTURE.md). */
  unsubscribeMailto?: string;
}

export interface EmailRecipient {
  to: string;
  sources: TagSources;
  /** `<id@domain>` */
  messageId: string;
  urls: RecipientUrls;
  date: Date;
}

/**
 * Text with every line break a LF (the composer writes each as CRLF). A lone CR would be kept as
 * it is by quoted-printable and signed so, then made CRLF by the SMTP client on its way out: the
 * receiver's body hash would differ, and DKIM fail.
 */
export const lineBreaks = (text: string): string => (text.includes('\r') ? text.replace(/\r\n?/g, '\n') : text);

/** A recipient's values for the skeletons' slots: as text, and escaped for HTML. */
function slotValues(compiled: CompiledEmail, r: Pick<EmailRecipient, 'sources' | 'urls'>) {
  const { tags, links } = compiled;
  const textValues: string[] = new Array(tags.length + links.length + FIXED_SLOTS);
  const htmlValues: string[] = new Array(textValues.length);
  for (let i = 0; i < tags.length; i++) {
    textValues[i] = lineBreaks(tagValue(tags[i], r.sources));
    htmlValues[i] = escapeHtml(textValues[i]);
  }
  for (let i = 0; i < links.length; i++) {
    textValues[tags.length + i] = r.urls.click(i);
    htmlValues[tags.length + i] = escapeHtml(textValues[tags.length + i]);
  }
  const fixed = tags.length + links.length;
  textValues[fixed + OPEN] = r.urls.open;
  htmlValues[fixed + OPEN] = escapeHtml(r.urls.open);
  textValues[fixed + UNSUBSCRIBE] = r.urls.unsubscribe;
  htmlValues[fixed + UNSUBSCRIBE] = escapeHtml(r.urls.unsubscribe);
  htmlValues[fixed + PREHEADER] = compiled.preheader
    ? escapeHtml(lineBreaks(renderTemplate(compiled.preheader, r.sources)))
    : '';
  return { textValues, htmlValues };
}

/** A recipient's subject and text alternative as plain strings, as the dry run previews them. */
export function renderedText(
  compiled: CompiledEmail,
  r: Pick<EmailRecipient, 'sources' | 'urls'>,
): { subject: string; text: string } {
  const { textValues } = slotValues(compiled, r);
  const { pieces, slots } = compiled.text;
  let text = pieces[0];
  for (let i = 0; i < slots.length; i++) text += textValues[slots[i]] + pieces[i + 1];
  return { subject: renderTemplate(compiled.subject, r.sources), text };
}

/** A run of characters with no whitespace, which the composer cannot fold a header at. */
const UNFOLDABLE = /\S{76,}/;

/**
 * The Subject as the composer writes it (encoded when not ASCII, folded at its whitespace); as
 * RFC 2047 encoded words, which fold, when a run of it has no whitespace (a tag's long value: a
 * token, a URL). Written as it was, such a run is one line past 998 characters, which RFC 5322
 * forbids: some relays refuse it, others break it, and DKIM's signature of it with it.
 */
function subjectHeaders(subject: string): Pick<MailComposerOptions, 'subject' | 'headers'> {
  if (!UNFOLDABLE.test(subject)) return { subject, headers: {} };
  // A tag's line breaks become spaces, as the composer makes them in the subjects it encodes.
  const oneLine = subject.replace(/\r\n|\r|\n/g, ' ');
  const header = 'Subject: ';
  const value = foldLines(header + encodeWord(oneLine, 'Q', 52)).slice(header.length);
  return { headers: { Subject: { prepared: true, value } } };
}

/** The recipient's message as raw MIME: multipart/alternative of text and HTML, UTF-8. */
export async function renderEmail(compiled: CompiledEmail, r: EmailRecipient): Promise<Buffer> {
  const { textValues, htmlValues } = slotValues(compiled, r);
  const { from, replyTo } = compiled.content;
  const subject = subjectHeaders(renderTemplate(compiled.subject, r.sources));
  const unsubscribe = r.urls.unsubscribeMailto
    ? `<${r.urls.unsubscribe}>, <${r.urls.unsubscribeMailto}>`
    : `<${r.urls.unsubscribe}>`;
  return composeMime(
    {
      from: { name: from.displayName ?? '', address: from.email },
      replyTo: replyTo ? { name: replyTo.displayName ?? '', address: replyTo.email } : undefined,
      to: r.to,
      subject: subject.subject,
      messageId: r.messageId,
      date: r.date,
      // Quoted-printable, said rather than left to the composer, which otherwise scans each part
      // character by character to choose (a third of its time on the bench's message): the parts
      // are mostly ASCII, which QP keeps readable and about as long, where base64 adds a third.
      // The bodies are written encoded already (composeMime's second argument); the composer is
      // given a stand-in, not read, since it leaves an empty part out.
      text: { content: ' ', contentType: 'text/plain; charset=utf-8', contentTransferEncoding: 'quoted-printable' },
      html: { content: ' ', contentType: 'text/html; charset=utf-8', contentTransferEncoding: 'quoted-printable' },
      headers: {
        ...subject.headers,
        ...(compiled.unsubscribe && {
          'List-Unsubscribe': unsubscribe,
          // RFC 8058: the URL above unsubscribes on a POST of this body, with no page to visit.
          'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
        }),
      },
    },
    [fillEncoded(compiled.text, textValues), fillEncoded(compiled.html, htmlValues)],
  );
}

/**
 * What `new MailComposer(options).compile().build()` gives, byte for byte (the test compares
 * them), for the one shape renderEmail composes: a multipart/alternative of quoted-printable
 * text parts. The composer builds the tree; it is written out here from the tree's own pieces,
 * each node's headers (MimeNode.buildHeaders) and nodemailer's quoted-printable encoder, joined
 * by the multipart's boundary lines as build() joins them. build() streams instead, through a
 * pipeline of streams and a turn of the event loop per node: on the bench's message that was
 * 0.5 ms of its 0.8 ms of CPU per recipient, the largest part of rendering one.
 *
 * `encoded`: the parts' bodies quoted-printable encoded already (renderEmail's fillEncoded),
 * written in place of the parts' content, which is then not read.
 */
export function composeMime(options: MailComposerOptions, encoded?: string[]): Buffer {
  const root = new MailComposer(options).compile();
  let raw = `${root.buildHeaders()}\r\n\r\n`;
  const parts = root.childNodes;
  if (
    root.multipart !== 'alternative' ||
    parts.some(
      (part) =>
        typeof part.content !== 'string' ||
        part.childNodes.length > 0 ||
        part.getTransferEncoding() !== 'quoted-printable',
    )
  ) {
    throw new TypeError('composeMime writes a multipart/alternative of quoted-printable text parts');
  }
  parts.forEach((part, i) => {
    const body = encoded?.[i] ?? encodeQuotedPrintable(part.content as string);
    raw += `${i > 0 ? '\r\n' : ''}--${root.boundary}\r\n${part.buildHeaders()}\r\n\r\n${wrapQuotedPrintable(body, 76)}`;
  });
  return Buffer.from(`${raw}\r\n--${root.boundary}--\r\n`);
}
