import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { checkName, nameKey } from '../crm/setup.ts';
import { badRequest, conflict } from '../errors.ts';
import { cursorCodec } from '../http/cursor.ts';
import { postProcedure } from '../http/idempotency.ts';

type Db = Kysely<Schema>;

export interface LandingPageView {
  landingPageId: string;
  name: string;
  url: string;
}

const view = (row: { id: string; name: string; url: string }): LandingPageView => ({
  landingPageId: row.id,
  name: row.name,
  url: row.url,
});

/**
 * An absolute http or https URL as a browser would send it (host lower-cased, IDN in
 * punycode, spaces escaped), which is what goes in the Location header of a click; undefined
 * for anything else. A URL with credentials is refused: `https://bank.example@evil.example`
 * reads as one host and leads to another.
 */
export function absoluteHttpUrl(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username !== '' || url.password !== '')
    return undefined;
  return url.href;
}

export interface NewLandingPage {
  id: string;
  accountId: string;
  name: string;
  url: string;
  now: number;
}

/** Checks a new landing page (400s), before its transaction. */
export function prepareLandingPage(
  accountId: string,
  body: { name: string; url: string },
  now: number,
): NewLandingPage {
  const name = checkName(body.name, 'name');
  const url = absoluteHttpUrl(body.url);
  if (url === undefined) {
    throw badRequest('The landing page URL must be an absolute http or https URL.', [
      { field: 'url', message: 'must be an absolute http:// or https:// URL, without a user name or password' },
    ]);
  }
  return { id: randomUUID(), accountId, name, url, now };
}

/** POST /landing-pages: the page, created in the request's transaction (http/idempotency.ts). */
export const postLandingPage = postProcedure(
  import.meta.url,
  'postLandingPage',
  async ({ db }, page: NewLandingPage) => {
    try {
      await db
        .insertInto('landing_pages')
        .values({
          id: page.id,
          account_id: page.accountId,
          name: page.name,
          name_key: nameKey(page.name),
          url: page.url,
          created_at: page.now,
        })
        .execute();
    } catch (error) {
      if (isUniqueViolation(error))
        throw conflict(`A landing page named ${page.name} already exists.`, [
          { field: 'name', message: 'is already taken (names are compared case-insensitively)' },
        ]);
      throw error;
    }
    return { statusCode: 201, body: view(page) };
  },
);

const cursor = cursorCodec(['integer', 'uuid']);

/** The account's landing pages, oldest first, a page at a time. */
export async function listLandingPages(db: Db, accountId: string, page: { limit: number; cursor?: string }) {
  let select = db
    .selectFrom('landing_pages')
    .select(['id', 'name', 'url', 'created_at'])
    .where('account_id', '=', accountId);
  if (page.cursor !== undefined) {
    const [createdAt, id] = cursor.decode(page.cursor);
    select = select.where(({ eb, refTuple, tuple }) => eb(refTuple('created_at', 'id'), '>', tuple(createdAt, id)));
  }
  const rows = await select
    .orderBy('created_at')
    .orderBy('id')
    .limit(page.limit + 1)
    .execute();
  const { rows: shown, nextCursor } = cursor.page(rows, page.limit, (last) => [Number(last.created_at), last.id]);
  return { landingPages: shown.map(view), nextCursor };
}

/** The URL of the account's landing page, or undefined: another account's page is as unknown as a missing one. */
export async function landingPageUrl(db: Db, accountId: string, landingPageId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('landing_pages')
    .select('url')
    .where('id', '=', landingPageId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row?.url;
}
