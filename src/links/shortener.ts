import type { Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import { isHostname } from '../config.ts';
import type { Schema } from '../db/schema.ts';
import { badRequest, conflict, notFound } from '../errors.ts';

type Db = Kysely<Schema>;

/** Where the service's own short links live: `PUBLIC_URL/l/<code>`. */
export const SERVICE_LINK_PATH = '/l';

/**
 * What a short link starts with, before `/<code>`: the custom shortener's origin, or the
 * service's own PUBLIC_URL/l when the request names none. A shortnerUrl that is not one
 * (refused with 422 by the SMS checks) is taken as written, so that a text is still measured
 * with about the length it would have had.
 */
export function linkBase(shortnerUrl: string | null, publicUrl: string): string {
  if (shortnerUrl === null) return `${publicUrl}${SERVICE_LINK_PATH}`;
  return parseShortenerUrl(shortnerUrl)?.origin ?? shortnerUrl;
}

/**
 * A shortnerUrl is `https://<domain>` or `http://<domain>`, nothing after it but an optional
 * `/`: a shortener host answers `/<code>` at its root, so a path, port, query or credentials
 * would make a link that host does not answer. Its origin and host, lower-cased, or undefined.
 */
export function parseShortenerUrl(shortnerUrl: string): { origin: string; host: string } | undefined {
  let url: URL;
  try {
    url = new URL(shortnerUrl);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.username !== '' || url.password !== '' || url.port !== '' || url.pathname !== '/' || /[?#]/.test(shortnerUrl))
    return undefined;
  return { origin: `${url.protocol}//${url.hostname}`, host: url.hostname };
}

export interface ShortenerDomainView {
  domain: string;
  createdAt: string;
}

/**
 * Registers a host as the account's shortener (the operator's admin API and CLI): links of
 * the account's sends may then start with `https://<domain>`, and that host answers
 * `/<code>` for the account's links alone. A domain belongs to one account; registering it
 * again for the same account changes nothing. The service's own host cannot be one: its
 * unknown paths are 404s, not codes.
 */
export async function addShortenerDomain(
  db: Db,
  clock: Clock,
  input: { accountId: string; domain: string; serviceHost: string },
): Promise<ShortenerDomainView> {
  const domain = input.domain.trim().toLowerCase();
  if (!isHostname(domain))
    throw badRequest('The shortener domain must be a domain name.', [
      { field: 'domain', message: 'must be a domain name, like go.example.com' },
    ]);
  if (domain === input.serviceHost) {
    throw badRequest("The service's own host cannot be a shortener domain.", [
      {
        field: 'domain',
        message: `is the service's own host (PUBLIC_URL); its links are at ${SERVICE_LINK_PATH}/<code> already`,
      },
    ]);
  }
  const account = await db.selectFrom('accounts').select('id').where('id', '=', input.accountId).executeTakeFirst();
  if (!account) throw notFound('The account');
  await db
    .insertInto('shortener_domains')
    .values({ domain, account_id: input.accountId, created_at: clock.now() })
    .onConflict((oc) => oc.column('domain').doNothing())
    .execute();
  const row = await db
    .selectFrom('shortener_domains')
    .select(['account_id', 'created_at'])
    .where('domain', '=', domain)
    .executeTakeFirstOrThrow();
  if (row.account_id !== input.accountId)
    throw conflict(`The domain ${domain} is the shortener of another account.`, [
      { field: 'domain', message: 'is registered for another account' },
    ]);
  return { domain, createdAt: new Date(row.created_at).toISOString() };
}

export async function listShortenerDomains(db: Db, accountId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('shortener_domains')
    .select('domain')
    .where('account_id', '=', accountId)
    .orderBy('domain')
    .execute();
  return rows.map((row) => row.domain);
}

/** The account whose shortener the host is, or undefined. */
export async function shortenerAccount(db: Db, host: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('shortener_domains')
    .select('account_id')
    .where('domain', '=', host.toLowerCase())
    .executeTakeFirst();
  return row?.account_id;
}
