import type { Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import { isHostname } from '../config.ts';
import type { Database } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import { badRequest, notFound } from '../errors.ts';
import type { Keyring } from '../sealed.ts';
import { findAccountById } from '../accounts/service.ts';
import { recordAudit, type AuditBy } from '../audit/entries.ts';
import {
  dkimDomainView,
  dkimRecord,
  generateDkimKey,
  insertKeyUnlessActive,
  type DkimDomainView,
  type DkimKeyHolder,
  type NewDkimKey,
} from './dkim-keys.ts';

/**
 * An account's email sender domains (the From domains it may send from besides the service's
 * DEFAULT_EMAIL_DOMAIN), each held with its DKIM keys (dkim-keys.ts).
 */

type Db = Kysely<Schema>;

/**
 * Authorises an email sender domain for the account and answers the DKIM record to publish
 * (ARCHITECTURE.md): the domain's key is made with it, in one transaction, so no domain is
 * held without a key. Adding a domain the account holds again answers its current record.
 */
export async function addSenderDomain(
  database: Database,
  keyring: Keyring,
  clock: Clock,
  args: { accountId: string; domain: string; serviceDomain: string; by: AuditBy },
): Promise<DkimDomainView> {
  const domain = args.domain.trim().toLowerCase();
  if (!isHostname(domain))
    throw badRequest('The sender domain must be a domain name.', [
      { field: 'domain', message: 'must be a domain name' },
    ]);
  if (domain === args.serviceDomain) {
    const already = 'every account sends from it already, signed with its key (GET /admin/dkim).';
    throw badRequest(`${domain} is the service's own domain (DEFAULT_EMAIL_DOMAIN): ${already}`, [
      { field: 'domain', message: "is the service's own domain" },
    ]);
  }
  const holder = { accountId: args.accountId, domain };
  const held = await database.db
    .selectFrom('dkim_keys')
    .selectAll()
    .where('account_id', '=', args.accountId)
    .where('domain', '=', domain)
    .where('retired_at', 'is', null)
    .executeTakeFirst();
  const key =
    held ??
    (await database.call(insertSenderDomain, {
      holder,
      key: await generateDkimKey(keyring, clock, domain),
      by: args.by,
    }));
  return { domain, dkim: dkimRecord(domain, key) };
}

export const insertSenderDomain = procedure(
  import.meta.url,
  'insertSenderDomain',
  async ({ db }, args: { holder: DkimKeyHolder & { accountId: string }; key: NewDkimKey; by: AuditBy }) =>
    db.transaction().execute(async (trx) => {
      const { accountId, domain } = args.holder;
      if (!(await findAccountById(trx, accountId))) throw notFound('The account');
      const inserted = await trx
        .insertInto('sender_domains')
        .values({ account_id: accountId, domain, created_at: args.key.createdAt })
        .onConflict((oc) => oc.columns(['account_id', 'domain']).doNothing())
        .executeTakeFirst();
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0)
        await recordAudit(trx, { ...args.by, accountId, action: 'senderDomain.added', target: domain });
      return insertKeyUnlessActive(trx, args.holder, args.key);
    }),
);

/**
 * The account's sender domains with their DKIM records, in name order; a domain authorised before
 * DKIM existed gets its key now.
 */
export async function listSenderDomains(
  database: Database,
  keyring: Keyring,
  clock: Clock,
  accountId: string,
): Promise<DkimDomainView[]> {
  const rows = await database.db
    .selectFrom('sender_domains')
    .select('domain')
    .where('account_id', '=', accountId)
    .orderBy('domain')
    .execute();
  const views: DkimDomainView[] = [];
  for (const { domain } of rows) views.push(await dkimDomainView(database, keyring, clock, { accountId, domain }));
  return views;
}

/**
 * The account's sender domain as a DKIM key holder (dkim-keys.ts, which answers 404 when
 * the account does not hold it), written as it was added: lower case.
 */
export async function senderDomainHolder(db: Db, accountId: string, domain: string): Promise<DkimKeyHolder> {
  if (!(await findAccountById(db, accountId))) throw notFound('The account');
  return { accountId, domain: domain.trim().toLowerCase() };
}
