import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';

type Db = Kysely<Schema>;

/** The identifier asked about: a mobile as E.164 digits, or an address lower-cased (as sends store them). */
export type Identifier = { mobile: string } | { email: string };

/** A person: the identifier given, and every number and address of the account's contacts that hold it. */
export interface Person {
  mobiles: string[];
  emails: string[];
}

/**
 * The person an identifier names in an account (the rule the erasure follows too): the
 * identifier, and the other identifier of every contact holding it, one hop only, so a contact
 * with that mobile brings its email and one with that email its mobile; a contact sharing only
 * that email's other number is not followed further. Found on contacts_mobile or contacts_email.
 */
export async function personOf(db: Db, accountId: string, given: Identifier): Promise<Person> {
  const mobiles = new Set<string>();
  const emails = new Set<string>();
  let select = db.selectFrom('contacts').select(['mobile', 'email']).where('account_id', '=', accountId);
  if ('mobile' in given) {
    mobiles.add(given.mobile);
    select = select.where('mobile', '=', given.mobile);
  } else {
    emails.add(given.email);
    select = select.where('email', '=', given.email);
  }
  for (const contact of await select.execute()) {
    if (contact.mobile !== null) mobiles.add(contact.mobile);
    if (contact.email !== null) emails.add(contact.email);
  }
  return { mobiles: [...mobiles].sort(), emails: [...emails].sort() };
}
