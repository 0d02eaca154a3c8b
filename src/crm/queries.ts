import { sql, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import type { DialectName } from '../db/database.ts';
import type { ContactsTable, Schema } from '../db/schema.ts';

type Db = Kysely<Schema>;

/**
 * The contact batch's hot statements, written out for each database.
 *
 * Every statement takes its rows as ONE JSON parameter and unpacks it in SQL (SQLite's
 * json_each, or jsonb_each for rows of objects, which reads their fields without parsing each
 * row again (sms/queries.ts); PostgreSQL's jsonb_array_elements) instead of binding a VALUES list:
 *  - the statement text is the same for 1 row or 1,000, so it is prepared once (the SQLite
 *    adapter caches statements by text; a VALUES list of each length is a new statement);
 *  - no batch can reach the bound-parameter ceilings (SQLite 32,766, PostgreSQL 65,535);
 *  - it was also the fastest form measured here: inserting 500 contacts among 100,000 on
 *    PostgreSQL took 11 ms from jsonb, 12 to 16 ms from unnest() arrays or from json, and
 *    15 to 16 ms from a VALUES list.
 * A batch is applied with the same handful of statements (candidates, ids, insert,
 * updates, memberships) whatever its size, never one per contact.
 */

/** A stored contact as the apply step reads it, with whether it is already in the target list. */
export type CandidateRow = Selectable<ContactsTable> & { in_list: boolean | number };

/** The one row shape that both the insert and the update unpack; `properties` in JSON. */
export interface ContactRow {
  id: number;
  email: string | null;
  mobile: string | null;
  countryCode: string | null;
  mobileOptIn: boolean;
  emailOptIn: boolean;
  properties: string;
}

/** A contact's membership of a list. */
export interface ListMember {
  listId: string;
  contactId: number;
}

export interface CandidateKeys {
  accountId: string;
  listId: string;
  /** The account's `All contacts`, which holds every contact: no need to look. */
  allContactsListId: string;
  /** contactIds named by the batch, each within the account. */
  ids: number[];
  /** Entries with both a mobile and an email. */
  pairs: Array<{ mobile: string; email: string }>;
  /** Mobiles of entries without an email, and emails of entries without a mobile. */
  mobiles: string[];
  emails: string[];
}

/**
 * A new contact batch's accept_order (migration 0047): PostgreSQL's identity column numbers it;
 * SQLite, whose writes are one at a time, takes the next number in the insert, by the
 * column's index.
 */
export const NEXT_ACCEPT_ORDER: Record<DialectName, RawBuilder<number>> = {
  postgres: sql<number>`default`,
  sqlite: sql<number>`(select coalesce(max(accept_order), 0) + 1 from contact_batches)`,
};

const json = (value: unknown) => JSON.stringify(value);

const SQLITE = {
  // One arm per kind of key, each driven from the batch's list of keys into an index seek
  // (the primary key, contacts_mobile or contacts_email) for each. CROSS JOIN keeps
  // json_each as the outer loop: with a plain JOIN the planner, which cannot know
  // json_each's row count, chose to scan the account's contacts once per batch instead
  // (apply time grew by 0.35 s per 100,000 contacts stored).
  // `email is null` / `mobile is null` are SPEC §4 rule 4's "only a mobile" / "only an email".
  candidates: (k: CandidateKeys) => sql<CandidateRow>`
    select m.*, ${k.listId} = ${k.allContactsListId}
                or exists (select 1 from list_members l
                            where l.list_id = ${k.listId} and l.contact_id = m.id) as in_list
      from (select c.* from json_each(${json(k.ids)}) i
             cross join contacts c on c.account_id = ${k.accountId} and c.id = i.value
            union all
            select c.* from jsonb_each(${json(k.pairs)}) p
             cross join contacts c on c.account_id = ${k.accountId}
                                  and c.mobile = p.value ->> 'mobile' and c.email = p.value ->> 'email'
            union all
            select c.* from json_each(${json(k.mobiles)}) p
             cross join contacts c on c.account_id = ${k.accountId} and c.mobile = p.value and c.email is null
            union all
            select c.* from json_each(${json(k.emails)}) p
             cross join contacts c on c.account_id = ${k.accountId} and c.email = p.value and c.mobile is null) m`,

  insert: (accountId: string, now: number, rows: ContactRow[]) => sql<{ id: number }>`
    insert into contacts (id, account_id, email, mobile, mobile_country_code, mobile_opt_in, email_opt_in,
                          properties, created_at, updated_at)
    select value ->> 'id', ${accountId}, value ->> 'email', value ->> 'mobile', value ->> 'countryCode',
           value ->> 'mobileOptIn', value ->> 'emailOptIn', value ->> 'properties', ${now}, ${now}
      from jsonb_each(${json(rows)}) where true
    on conflict (account_id, id) do nothing
    returning id`,

  // The rows are found from the batch's list by the key (account_id, id), a seek each, then
  // updated by rowid. Written as UPDATE … FROM json_each, or with the lookup as a subquery
  // (which SQLite flattens), the planner scanned the account's contacts once per row of the
  // list instead: a 1,000-contact batch took 1.5 s at 20,000 contacts stored. A
  // MATERIALIZED CTE keeps the lookup a step of its own, driven by json_each.
  update: (accountId: string, now: number, rows: ContactRow[]) => sql`
    with u as materialized (
      select c.rowid as rid, v.value from jsonb_each(${json(rows)}) v
       cross join contacts c on c.account_id = ${accountId} and c.id = v.value ->> 'id')
    update contacts
       set email = u.value ->> 'email', mobile = u.value ->> 'mobile', mobile_country_code = u.value ->> 'countryCode',
           mobile_opt_in = u.value ->> 'mobileOptIn', email_opt_in = u.value ->> 'emailOptIn',
           properties = u.value ->> 'properties', updated_at = ${now}
      from u
     where contacts.rowid = u.rid`,

  updateData: (accountId: string, now: number, rows: ContactRow[]) => sql`
    with u as materialized (
      select c.rowid as rid, v.value from jsonb_each(${json(rows)}) v
       cross join contacts c on c.account_id = ${accountId} and c.id = v.value ->> 'id')
    update contacts
       set mobile_opt_in = u.value ->> 'mobileOptIn', email_opt_in = u.value ->> 'emailOptIn',
           properties = u.value ->> 'properties', updated_at = ${now}
      from u
     where contacts.rowid = u.rid`,

  // `where true` lets SQLite's parser tell the upsert clause from a join's ON.
  addMembers: (now: number, members: ListMember[]) => sql`
    insert into list_members (list_id, contact_id, added_at)
    select value ->> 'listId', value ->> 'contactId', ${now} from jsonb_each(${json(members)}) where true
    on conflict do nothing`,
};

/**
 * PostgreSQL: a batch's contact rows as typed columns, decoded once by jsonb_to_recordset rather
 * than field by field (`->>` and a cast for each column of each row).
 */
const contactRecords = (rows: ContactRow[]) => sql`jsonb_to_recordset(${json(rows)}::jsonb) r(
  id bigint, email text, mobile text, "countryCode" text, "mobileOptIn" boolean, "emailOptIn" boolean,
  properties text)`;

const POSTGRES = {
  // The same arms as LATERAL subqueries. OFFSET 0 keeps each one a subquery run once per
  // key (an index seek) rather than a join the planner may turn into a hash join over the
  // account's whole index: it did so whenever statistics were stale, right after a bulk
  // load, taking 35 ms a batch at 100,000 contacts stored (9 ms with fresh statistics).
  // The "only a mobile" / "only an email" tests stay outside the subquery: inside, on a table
  // never analysed, `email = ? and mobile is null` was answered from contacts_mobile
  // (account_id, mobile is null), which every email-only contact matches, and each batch was
  // slower than the last (1.3 s per 1,000 at 20,000 contacts). Outside, the subquery can only
  // seek by the value itself, whatever the statistics say.
  candidates: (k: CandidateKeys) => sql<CandidateRow>`
    select m.*, ${k.listId} = ${k.allContactsListId}
                or exists (select 1 from list_members l
                            where l.list_id = ${k.listId} and l.contact_id = m.id) as in_list
      from (select c.* from jsonb_array_elements_text(${json(k.ids)}::jsonb) i(id)
             cross join lateral (select * from contacts where account_id = ${k.accountId}
                                    and id = i.id::bigint offset 0) c
            union all
            select c.* from jsonb_array_elements(${json(k.pairs)}::jsonb) p
             cross join lateral (select * from contacts where account_id = ${k.accountId}
                                    and mobile = p ->> 'mobile' and email = p ->> 'email' offset 0) c
            union all
            select c.* from jsonb_array_elements_text(${json(k.mobiles)}::jsonb) p(mobile)
             cross join lateral (select * from contacts where account_id = ${k.accountId}
                                    and mobile = p.mobile offset 0) c
             where c.email is null
            union all
            select c.* from jsonb_array_elements_text(${json(k.emails)}::jsonb) p(email)
             cross join lateral (select * from contacts where account_id = ${k.accountId}
                                    and email = p.email offset 0) c
             where c.mobile is null) m`,

  insert: (accountId: string, now: number, rows: ContactRow[]) => sql<{ id: number }>`
    insert into contacts (id, account_id, email, mobile, mobile_country_code, mobile_opt_in, email_opt_in,
                          properties, created_at, updated_at)
    select r.id, ${accountId}, r.email, r.mobile, r."countryCode", r."mobileOptIn", r."emailOptIn", r.properties,
           ${now}::bigint, ${now}::bigint
      from ${contactRecords(rows)}
    on conflict (account_id, id) do nothing
    returning id`,

  update: (accountId: string, now: number, rows: ContactRow[]) => sql`
    update contacts c
       set email = r.email, mobile = r.mobile, mobile_country_code = r."countryCode",
           mobile_opt_in = r."mobileOptIn", email_opt_in = r."emailOptIn", properties = r.properties,
           updated_at = ${now}::bigint
      from ${contactRecords(rows)}
     where c.account_id = ${accountId} and c.id = r.id`,

  updateData: (accountId: string, now: number, rows: ContactRow[]) => sql`
    update contacts c
       set mobile_opt_in = r."mobileOptIn", email_opt_in = r."emailOptIn", properties = r.properties,
           updated_at = ${now}::bigint
      from ${contactRecords(rows)}
     where c.account_id = ${accountId} and c.id = r.id`,

  addMembers: (now: number, members: ListMember[]) => sql`
    insert into list_members (list_id, contact_id, added_at)
    select r."listId", r."contactId", ${now}::bigint
      from jsonb_to_recordset(${json(members)}::jsonb) r("listId" text, "contactId" bigint)
    on conflict do nothing`,
};

const STATEMENTS = { sqlite: SQLITE, postgres: POSTGRES };

/** The statement loadCandidates runs; test/crm/planner.test.ts checks its plan. */
export function candidatesQuery(dialect: DialectName, keys: CandidateKeys): RawBuilder<CandidateRow> {
  return STATEMENTS[dialect].candidates(keys);
}

export async function loadCandidates(db: Db, dialect: DialectName, keys: CandidateKeys): Promise<CandidateRow[]> {
  return (await candidatesQuery(dialect, keys).execute(db)).rows;
}

/**
 * `count` new contact ids of the account, none of them in `reserved` (the ids the batch
 * itself names). The account's counter knows nothing of the ids its client chose for
 * contacts created by contactId, and a client's choice never moves it, so a client naming
 * id 2^53 cannot push every later id past what JavaScript holds exactly. An id handed out
 * that the client already took is caught by the insert (insertContacts). The counter row
 * is locked until commit, but only the account's own batches write it, and those apply
 * one at a time anyway (lockAccountContacts).
 */
export async function allocateContactIds(
  db: Db,
  accountId: string,
  count: number,
  reserved: ReadonlySet<number>,
): Promise<number[]> {
  const ids: number[] = [];
  while (ids.length < count) {
    const wanted = count - ids.length;
    const { last } = await db
      .insertInto('contact_id_counters')
      .values({ account_id: accountId, last_value: wanted })
      .onConflict((oc) =>
        oc.column('account_id').doUpdateSet({ last_value: sql`contact_id_counters.last_value + excluded.last_value` }),
      )
      .returning('last_value as last')
      .executeTakeFirstOrThrow();
    for (let id = Number(last) - wanted + 1; id <= Number(last); id++) if (!reserved.has(id)) ids.push(id);
  }
  return ids;
}

/**
 * Inserts new contacts and answers the ids it inserted: a row whose id the account's client
 * already took by contactId is passed over rather than failing the batch, for the caller
 * to draw another id.
 */
export async function insertContacts(
  db: Db,
  dialect: DialectName,
  accountId: string,
  now: number,
  rows: ContactRow[],
): Promise<Set<number>> {
  if (rows.length === 0) return new Set();
  return new Set(
    (await STATEMENTS[dialect].insert(accountId, now, rows).execute(db)).rows.map((row) => Number(row.id)),
  );
}

/**
 * The statement updateContacts (`whole`) or updateContactData (`data`) runs;
 * test/crm/planner.test.ts checks its plan.
 */
export function updateQuery(
  dialect: DialectName,
  what: 'whole' | 'data',
  accountId: string,
  now: number,
  rows: ContactRow[],
): RawBuilder<unknown> {
  return STATEMENTS[dialect][what === 'whole' ? 'update' : 'updateData'](accountId, now, rows);
}

/** Rewrites stored contacts whole; their mobile or email changed (an entry with a contactId). */
export async function updateContacts(
  db: Db,
  dialect: DialectName,
  accountId: string,
  now: number,
  rows: ContactRow[],
): Promise<void> {
  if (rows.length > 0) await updateQuery(dialect, 'whole', accountId, now, rows).execute(db);
}

/**
 * Rewrites what changes when a contact is matched by its mobile and email: opt-ins and
 * properties. Leaving the indexed columns out of the SET matters on SQLite, which rewrites
 * the index entries of every column SET names, changed or not: updating 500 of 100,000
 * stored contacts (commit included) took 46 ms with them and 15 to 24 ms without.
 * PostgreSQL compares the values and makes no difference (8 to 10 ms either way).
 */
export async function updateContactData(
  db: Db,
  dialect: DialectName,
  accountId: string,
  now: number,
  rows: ContactRow[],
): Promise<void> {
  if (rows.length > 0) await updateQuery(dialect, 'data', accountId, now, rows).execute(db);
}

export async function addListMembers(db: Db, dialect: DialectName, now: number, members: ListMember[]): Promise<void> {
  if (members.length > 0) await STATEMENTS[dialect].addMembers(now, members).execute(db);
}

/**
 * Takes the account's contact lock and answers the id of its `All contacts`, in one round
 * trip. PostgreSQL: the account's batches apply one at a time, across every worker
 * process; without it two batches naming one new email could both find no record and both
 * create one. SQLite needs no lock: its one writer already runs transactions one by one.
 */
export async function lockAccountContacts(db: Db, dialect: DialectName, accountId: string): Promise<string> {
  const defaultList = sql<string>`(select id from contact_lists
                                     where account_id = ${accountId} and is_default = ${sql.lit(true)})`;
  const query =
    dialect === 'postgres'
      ? sql<{
          id: string;
        }>`select pg_advisory_xact_lock(hashtextextended(${`contacts:${accountId}`}, 0)), ${defaultList} as id`
      : sql<{ id: string }>`select ${defaultList} as id`;
  return (await query.execute(db)).rows[0].id;
}

/**
 * Which of `listIds` are lists still, each with its account, for a write that names them after
 * its checks found them (a send, a contact batch). On PostgreSQL each found is locked (FOR KEY
 * SHARE) until the transaction ends, so a DELETE /lists/{listId} that locks the list first
 * (lockListToDelete) waits for the write and then finds it; one that got there first has
 * deleted the list by the time this reads, and the write is refused. SQLite's one writer runs
 * the two transactions one after the other.
 */
export async function lockNamedLists(
  db: Db,
  dialect: DialectName,
  listIds: string[],
): Promise<Array<{ id: string; account_id: string }>> {
  if (listIds.length === 0) return [];
  const query = db.selectFrom('contact_lists').select(['id', 'account_id']).where('id', 'in', listIds);
  return (dialect === 'postgres' ? query.forKeyShare() : query).execute();
}

/**
 * The account's list `listId`, locked (FOR UPDATE on PostgreSQL) for its DELETE to look for the
 * sends and batches that name it: a write naming it (lockNamedLists) either committed before the
 * lock was granted, and is seen, or waits for the delete and finds the list gone.
 */
export async function lockListToDelete(
  db: Db,
  dialect: DialectName,
  accountId: string,
  listId: string,
): Promise<{ id: string } | undefined> {
  const query = db
    .selectFrom('contact_lists')
    .select('id')
    .where('id', '=', listId)
    .where('account_id', '=', accountId);
  return (dialect === 'postgres' ? query.forUpdate() : query).executeTakeFirst();
}
