import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import { CODE_LENGTH, recipientLinks, sharedLink } from '../links/codes.ts';
import { landingPageUrl } from '../links/landing-pages.ts';
import { linkBase } from '../links/shortener.ts';
import type { SmsContent } from './accept.ts';

/**
 * Where a text wants its landing page link: each `[landingPageUrl]` becomes the link. A body
 * without it gets the link at its end, after a space. Written exactly so; a request's own tag
 * of that name is refused, and so is the tag in a body with no landing page.
 */
export const LANDING_PAGE_TAG = '[landingPageUrl]';

/** The body with the tag wherever the link goes. */
export const withLinkTag = (body: string) => (body.includes(LANDING_PAGE_TAG) ? body : `${body} ${LANDING_PAGE_TAG}`);

/**
 * The body as long as its texts will be with their links, for measuring at acceptance: a link
 * is `<base>/<code>`, and every code has CODE_LENGTH characters of the GSM-7 alphabet.
 */
export const withSampleLink = (body: string, base: string) =>
  withLinkTag(body).replaceAll(LANDING_PAGE_TAG, sampleLink(base));

/** A stand-in of a landing page link's length, for measuring and for the dry run's preview: no code is made. */
export const sampleLink = (base: string) => `${base}/${'0'.repeat(CODE_LENGTH)}`;

/** The links of a page's recipients, in their order, each written to the database before it is given. */
export type PageLinks = (recipientIds: number[]) => Promise<string[]>;

/**
 * A send's landing page links: one per recipient, its own (isUniqueUrl, the default), made a
 * page at a time in one statement; or one the whole send shares, made once and found again
 * when the send resumes. Asked for before a page is submitted, so that no text carries a code
 * the database does not hold.
 */
export async function landingPageLinks(
  database: Database,
  clock: Clock,
  send: { sendId: string; accountId: string; content: SmsContent },
  publicUrl: string,
): Promise<PageLinks> {
  const { landingPageId, shortener } = send.content;
  // Landing pages are never deleted but with their account, whose sends go with it.
  const url = await landingPageUrl(database.db, send.accountId, landingPageId!);
  if (url === undefined) throw new Error(`the landing page ${landingPageId} is not the account's`);
  const base = linkBase(shortener?.url ?? null, publicUrl);
  const target = () => ({ accountId: send.accountId, sendId: send.sendId, url, now: clock.now() });
  if (shortener?.unique === false) {
    const link = `${base}/${await sharedLink(database, target())}`;
    return async (recipientIds) => recipientIds.map(() => link);
  }
  return async (recipientIds) =>
    (await recipientLinks(database, target(), recipientIds)).map((code) => `${base}/${code}`);
}
