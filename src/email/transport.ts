/** One recipient's email, rendered, as a transport takes it. */
export interface OutgoingEmail {
  accountId: string;
  sendId: string;
  /** Herald's id of the message (a UUID); the Message-ID header is `<messageId@domain>`. */
  messageId: string;
  /** The envelope sender. */
  from: string;
  to: string;
  /** The whole message, as raw MIME. */
  raw: Buffer;
  /** A Verify code: a transport that keeps what it sends keeps it sealed (the sandbox opens it for its account). */
  passcode?: boolean;
}

/**
 * What became of one email at the next hop, with its SMTP reply: accepted (Delivered),
 * refused for now (4xx: Deferred, tried again) or for good (5xx: Bounce).
 */
export type EmailResult =
  | { outcome: 'accepted'; reply: string }
  | { outcome: 'deferred'; reply: string }
  | { outcome: 'bounced'; reply: string };

/**
 * A way out for email (MESSAGING.md: the pipeline never knows which one it drives): hands
 * over one message and answers what the next hop said. The pipeline hands over a page's
 * messages concurrently; a transport bounds its own connections.
 */
export interface EmailTransport {
  send(message: OutgoingEmail, signal: AbortSignal): Promise<EmailResult>;
  close(): Promise<void>;
}

/** The longest reply kept, a relay's or a DSN's Diagnostic-Code: a server's words, not its essay. */
const MAX_REPLY = 1000;

/**
 * A remote server's words as a reply to keep: control characters (NUL among them, which
 * PostgreSQL's text cannot hold, and the line breaks of a multi-line reply) as spaces, runs of
 * space as one, at most MAX_REPLY UTF-16 units, cut between characters (half of a surrogate
 * pair is refused by PostgreSQL's jsonb, and the page's record would fail with it).
 */
export function keptReply(text: string): string {
  const kept = text
    // biome-ignore lint/suspicious/noControlCharactersInRegex: replacing control characters is its purpose
    .replace(/[\u0000-\u001f\u007f]+/g, ' ')
    .replace(/ {2,}/g, ' ')
    .trim()
    .slice(0, MAX_REPLY);
  // A copy, not the slice V8 makes, which keeps the whole reply alive with it: a relay's
  // megabyte-long replies, one a recipient, filled the heap before a page was recorded.
  return Buffer.from(kept.replace(/[\uD800-\uDBFF]$/, '').toWellFormed()).toString();
}

/** A 5xx reply whose enhanced status is 5.1.x (unknown user or domain): the address is suppressed (ARCHITECTURE.md). */
export const isHardBounce = (reply: string) => /(?:^|\s)5\.1\.\d{1,3}(?:\s|$)/.test(reply);

/**
 * A 5xx reply as a Bounce records and posts it, saying which kind (`hard bounce: 550 5.1.1 …`,
 * `soft bounce: 552 5.2.2 …`), whether the relay answered it or a bounce came back later by mail.
 */
export function bounceReply(reply: string): { hard: boolean; reply: string } {
  const hard = isHardBounce(reply);
  return { hard, reply: `${hard ? 'hard' : 'soft'} bounce: ${reply}` };
}
