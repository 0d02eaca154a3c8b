import { sql, type Expression, type Kysely, type RawBuilder } from 'kysely';
import type { DialectName } from '../db/database.ts';
import { erasedAddress } from './erased-identifiers.ts';
import type { Schema } from '../db/schema.ts';
import { inJson } from '../db/in-json.ts';
import { dialectOf, SYNCHRONOUS_READS } from '../db/dialect.ts';
import { PLAN_ONCE } from '../db/prepared.ts';
import { Gathering, GROUP_SIZE } from '../db/gathering.ts';
import type { FieldError } from '../errors.ts';
import { queries, type ErasedReason, type StandingKey } from './queries.ts';

type Db = Kysely<Schema>;

/**
 * Which contact column is a channel's address, which opt-in is its consent, and the status
 * word of a recipient it may not be sent to (ARCHITECTURE.md: NotSent for SMS, Dropped for email).
 */
const CHANNEL = {
  sms: { address: 'mobile', optIn: 'mobile_opt_in', optInField: 'mobileOptIn', refused: 'NotSent' },
  email: { address: 'email', optIn: 'email_opt_in', optInField: 'emailOptIn', refused: 'Dropped' },
} as const;

export type Channel = keyof typeof CHANNEL;

/**
 * The INSERT of requests' own recipients, each send's in request order (they come first: a
 * list's contact with the same address adds nothing, rule 3 of SPEC §2.2).
 */
export function requestRecipientsInsert(
  dialect: DialectName,
  sends: Array<{ sendId: string; now: number; recipients: StoredRecipient[] }>,
) {
  const rows = sends.flatMap(({ sendId, now, recipients }) =>
    recipients.map((r) => ({ sendId, now, address: r.address, tags: r.tags, contactId: r.contactId ?? null })),
  );
  return queries[dialect].insertRequestRecipients(rows);
}

/**
 * A request's recipient as written. `tags`: its own tags in JSON (sealed when the send's body
 * is), null for none; `contactId` when it is known already (an immediate single's,
 * addressStanding).
 */
export interface StoredRecipient {
  address: string;
  tags: string | null;
  contactId?: number | null;
}

/** The send an expansion, or a dry run (dry-run.ts), is for: whose contacts, over which lists. */
export interface Audience {
  channel: Channel;
  accountId: string;
  /** The send's lists; the account's `All contacts` among them means every contact. */
  listIds: string[];
  allContactsListId: string;
  /** The key of erased identifiers' hashes (erased-identifiers.ts), for their suppressions. */
  erasureKey: Buffer;
}

/**
 * The rules of who a send reaches, as SQL over an address, shared by the expansion that writes
 * a send's recipients and the dry run that only counts them, so the two never disagree:
 *
 *  - `ranked`: the contacts of the send's lists in a range of addresses, each with its rank
 *    among the contacts of its address (1: the most recently updated, whose data fills the
 *    tags, SPEC §2.2 rule 4); null when the send has no list;
 *  - `suppression`: the reason the address is suppressed, if it is;
 *  - `lacksConsent`: consent is per address (ARCHITECTURE.md): any contact of the account with
 *    the address lacking the channel's opt-in refuses it, whichever contact the row names;
 *  - `latestContact`: the account's most recently updated contact with the address, for a
 *    request's own recipient, whose properties fill the tags it does not give itself.
 */
export function audienceRules(dialect: DialectName, a: Audience) {
  const { address, optIn } = CHANNEL[a.channel];
  const col = sql<string>`${sql.ref(`c.${address}`)}`;
  const everyone = a.listIds.includes(a.allContactsListId);
  const lists = a.listIds.filter((id) => id !== a.allContactsListId);
  const ofAddress = (ref: Expression<string>) => sql`c.account_id = ${a.accountId} and ${col} = ${ref}`;
  return {
    column: col,
    hasLists: everyone || lists.length > 0,
    /**
     * With `entries`, each row also carries how many entries the lists hold for its address: a
     * contact counts once for each list of the send holding it (`All contacts` holds them all),
     * looked up per contact by its memberships' index.
     *
     * Membership is that same count, not an `exists`: PostgreSQL turns an `exists` into a semi
     * join, which it planned as a hash of every membership of the lists for each range (0.3 to
     * 1.3 s a range of 5,000 in a list of 300,000, so a send's expansion grew with the square of
     * its list); a scalar subquery can only be answered by the index, per contact.
     */
    ranked(range: AddressRange, options: { entries?: boolean } = {}) {
      const inLists = sql`(select count(*) from list_members m
                            where m.contact_id = c.id and m.list_id in ${inJson(dialect, lists)})`;
      const member = lists.length > 0 && !everyone ? sql`and ${inLists} > 0` : sql``;
      const memberships = lists.length === 0 ? sql`1` : everyone ? sql`1 + ${inLists}` : inLists;
      const entries = options.entries ? sql`, sum(${memberships}) over (partition by ${col}) as entries` : sql``;
      return sql`
        select c.id, ${col} as address, c.properties,
               row_number() over (partition by ${col} order by c.updated_at desc, c.id desc) as rank ${entries}
          from contacts c
         where c.account_id = ${a.accountId} and ${col} is not null and ${range.holds(col)} ${member}`;
    },
    /**
     * The reason the address is suppressed, or null: a subquery on the suppression's key, not a
     * join, which PostgreSQL planned by a table's stale statistics as a scan of the account's
     * suppressions for each recipient. Then an erased person's, from those found among the
     * statement's addresses (erasedAmong).
     */
    suppression: (ref: Expression<string>, erased: readonly ErasedReason[]) => {
      const own = sql<string | null>`(select s.reason from suppressions s
          where s.account_id = ${a.accountId} and s.channel = ${a.channel} and s.address = ${ref})`;
      if (erased.length === 0) return own;
      return sql<string | null>`coalesce(${own},
        (select e.reason from ${queries[dialect].erasedReasons(erased)} e where e.address = ${ref}))`;
    },
    hasContact: (ref: Expression<string>) => sql<boolean>`exists (select 1 from contacts c where ${ofAddress(ref)})`,
    lacksConsent: (ref: Expression<string>) =>
      sql<boolean>`exists (select 1 from contacts c where ${ofAddress(ref)} and not c.${sql.raw(optIn)})`,
    latestContact: (ref: Expression<string>, field: 'id' | 'properties') =>
      sql`(select c.${sql.raw(field)} from contacts c where ${ofAddress(ref)}
            order by c.updated_at desc, c.id desc limit 1)`,
  };
}

/**
 * The suppressions of erased people among `addresses` (a list, or a query of one column
 * `address`), for audienceRules' `suppression`. Their keyed hashes are made here, never in SQL:
 * the key sent with a statement would be in any server log that records its parameters, and with
 * it a copy of the database would tell whose number was erased. An account that has erased no
 * one on the channel costs one seek, and its addresses are not read.
 */
export async function erasedAmong(
  db: Db,
  a: Pick<Audience, 'accountId' | 'channel' | 'erasureKey'>,
  addresses: readonly string[] | RawBuilder<{ address: string }>,
): Promise<ErasedReason[]> {
  const erased = db
    .selectFrom('erased_suppressions')
    .where('account_id', '=', a.accountId)
    .where('channel', '=', a.channel);
  if ((await erased.select('hash').limit(1).executeTakeFirst()) === undefined) return [];
  const list = Array.isArray(addresses)
    ? (addresses as readonly string[])
    : (await (addresses as RawBuilder<{ address: string }>).execute(db)).rows.map((row) => row.address);
  const byHash = new Map([...new Set(list)].map((address) => [erasedAddress(a.erasureKey, address), address]));
  const found: ErasedReason[] = [];
  const hashes = [...byHash.keys()];
  for (let i = 0; i < hashes.length; i += ERASED_LOOKUP) {
    const rows = await erased
      .select(['hash', 'reason'])
      .where('hash', 'in', hashes.slice(i, i + ERASED_LOOKUP))
      .execute();
    for (const row of rows) found.push({ address: byHash.get(row.hash)!, reason: row.reason });
  }
  return found;
}

/** Hashes looked up in one statement: well within either database's count of parameters. */
const ERASED_LOOKUP = 1000;

/** A range of contact addresses, after `after` (null: from the first) through `through` (null: to the last). */
export interface AddressRange {
  after: string | null;
  through: string | null;
  holds(ref: Expression<string>): RawBuilder<boolean>;
}

/**
 * The range of addresses that starts after `after` and spans `size` of the account's contacts
 * with the channel's address (the last range: to the end).
 */
export async function nextRange(
  db: Db,
  dialect: DialectName,
  a: Audience,
  after: string | null,
  size: number,
): Promise<AddressRange> {
  const col = audienceRules(dialect, a).column;
  const { rows } = await sql<{ address: string }>`
    select ${col} as address from contacts c
     where c.account_id = ${a.accountId} and ${col} is not null
           ${after === null ? sql`` : sql`and ${col} > ${after}`}
     order by ${col} limit 1 offset ${size - 1}`.execute(db);
  return addressRange(after, rows[0]?.address ?? null);
}

export function addressRange(after: string | null, through: string | null): AddressRange {
  return {
    after,
    through,
    holds: (ref) => {
      const afterStart = after === null ? sql`true` : sql`${ref} > ${after}`;
      const upToEnd = through === null ? sql`true` : sql`${ref} <= ${through}`;
      return sql<boolean>`${afterStart} and ${upToEnd}`;
    },
  };
}

export interface Expansion extends Audience {
  sendId: string;
  /** Where this range starts: after this address (null: the first range). */
  after: string | null;
  now: number;
  /** Contact addresses a range spans at most: EXPANSION_RANGE unless told (tests). */
  rangeSize?: number;
  /** Counts the recipients the range refused, for the caller's transaction's rollup (rollup.ts's UsageTally). */
  tally?: { add(accountId: string, channel: Channel, status: string, count: { messages: number }): void };
}

/**
 * Contact addresses one range of an expansion spans at most: a range is one transaction,
 * a few tens of milliseconds, so SQLite's one writer never keeps a one-time passcode waiting
 * behind a list of 100,000 (whole, it held the writer for about a second).
 */
export const EXPANSION_RANGE = 5000;

/**
 * Writes a range of a send's recipients from its lists and settles who in it may be sent to,
 * in a handful of set-based statements whatever the lists' size (MESSAGING.md, "expand"):
 * nothing of a list is held in memory. Ranges are of addresses, in order, each covering every
 * source's addresses in it, so every rule (audienceRules) sees all of an address at once; run
 * each in one transaction with the send's checkpoint (the last address it covered, returned),
 * so a worker that dies here leaves nothing half done. Answers null once the last range is
 * done. A list's contacts join after the request's recipients: one with an address the
 * request gave adds nothing (SPEC §2.2 rule 3). A suppressed address is refused (NotSent,
 * Dropped), and so is one without consent.
 */
export async function expandRecipients(db: Db, dialect: DialectName, e: Expansion): Promise<string | null> {
  const { refused } = CHANNEL[e.channel];
  const rules = audienceRules(dialect, e);
  const now = queries[dialect].epochMs(e.now);
  const range = rules.hasLists
    ? await nextRange(db, dialect, e, e.after, e.rangeSize ?? EXPANSION_RANGE)
    : addressRange(e.after, null);
  if (rules.hasLists) {
    await sql`
      insert into send_recipients (send_id, address, contact_id, status, updated_at, bound_tokens)
      select ${e.sendId}, address, id, 'Queued', ${now}, true
        from (${rules.ranked(range)}) ranked
       where rank = 1
       order by address
      on conflict (send_id, address) do nothing`.execute(db);
  }
  const recipient = sql<string>`send_recipients.address`;
  // Only the recipients a contact has: rewriting the others' rows to set null again was a new
  // row version each, the largest cost of expanding a request's own recipients on PostgreSQL.
  await sql`
    update send_recipients
       set contact_id = ${rules.latestContact(recipient, 'id')}
     where send_id = ${e.sendId} and contact_id is null and ${range.holds(recipient)}
       and ${rules.hasContact(recipient)}`.execute(db);
  const queued = sql`send_id = ${e.sendId} and status = 'Queued' and ${range.holds(recipient)}`;
  const erased = await erasedAmong(
    db,
    e,
    sql<{ address: string }>`select address from send_recipients where ${queued}`,
  );
  await sql`
    update send_recipients
       set status = ${refused}, reason = 'suppressed: ' || ${rules.suppression(recipient, erased)}, updated_at = ${now}
     where ${queued} and ${rules.suppression(recipient, erased)} is not null`.execute(db);
  await sql`
    update send_recipients
       set status = ${refused}, reason = 'no consent: a contact with this address has not opted in', updated_at = ${now}
     where send_id = ${e.sendId} and status = 'Queued' and ${range.holds(recipient)}
       and ${rules.lacksConsent(recipient)}`.execute(db);
  const history = await sql`
    insert into recipient_history (recipient_id, status, at)
    select id, status, ${now} from send_recipients
     where send_id = ${e.sendId} and status = ${refused} and ${range.holds(sql<string>`address`)}`.execute(db);
  e.tally?.add(e.accountId, e.channel, refused, { messages: Number(history.numAffectedRows ?? 0) });
  return range.through;
}

/**
 * A send's recipients held until a due time (`due_at`: quiet hours, or their own clock's time)
 * whose time has come, in the caller's transaction before its job reads its first page:
 * consent and suppression are decided again, as the expansion decided them (audienceRules),
 * since the send started up to a day before; those refused end NotSent or Dropped, with their
 * history, counted in `tally`, and are answered; the others are released (`due_at` and the
 * reason they waited for cleared) to be sent as any recipient. Found by the partial index
 * send_recipients_due: a send holding none costs a seek. Retries are decided again the same way,
 * email's due (Deferred: a relay refused them for now up to 72 hours before) and SMS's (Queued
 * with a `deferred_at`: an SMSC did): an address suppressed (a STOP, an erasure) or unsubscribed
 * meanwhile is not tried again.
 */
export async function releaseDueRecipients(
  db: Db,
  dialect: DialectName,
  r: {
    channel: Channel;
    accountId: string;
    sendId: string;
    now: number;
    erasureKey: Buffer;
    /** Whether a contact's consent is decided again too (false: a Verify code, which goes without). */
    consent: boolean;
    tally: { add(accountId: string, channel: Channel, status: string, count: { messages: number }): void };
  },
): Promise<Array<{ id: number; address: string; reason: string | null }>> {
  const { refused } = CHANNEL[r.channel];
  const rules = audienceRules(dialect, {
    channel: r.channel,
    accountId: r.accountId,
    listIds: [],
    allContactsListId: '',
    erasureKey: r.erasureKey,
  });
  const address = sql<string>`send_recipients.address`;
  const now = queries[dialect].epochMs(r.now);
  const due = sql`send_id = ${r.sendId} and status = 'Queued' and due_at is not null and due_at <= ${now}`;
  const retrying = sql`send_id = ${r.sendId} and status = 'Deferred' and retry_at is not null and retry_at <= ${now}`;
  // An SMS an SMSC refused for now stays Queued (sms/send.ts, keepFirstRefusals), tried again at once.
  const triedAgain = sql`send_id = ${r.sendId} and status = 'Queued' and deferred_at is not null`;
  // Each kind of waiting recipient by its own partial index (send_recipients_due, _retry, _tried_again).
  const refuse = async (reason: RawBuilder<unknown>, condition: RawBuilder<unknown>) => {
    const rows: Array<{ id: number; address: string; reason: string | null }> = [];
    for (const waiting of [due, retrying, triedAgain]) {
      const refusedNow = await sql<(typeof rows)[number]>`
        update send_recipients
           set status = ${refused}, reason = ${reason}, due_at = null, retry_at = null, updated_at = ${now}
         where ${waiting} and ${condition}
        returning id, address, reason`.execute(db);
      rows.push(...refusedNow.rows);
    }
    return rows;
  };
  const erased = await erasedAmong(
    db,
    r,
    sql<{ address: string }>`select address from send_recipients where (${due}) or (${retrying}) or (${triedAgain})`,
  );
  const suppressed = await refuse(
    sql`'suppressed: ' || ${rules.suppression(address, erased)}`,
    sql`${rules.suppression(address, erased)} is not null`,
  );
  const unconsented = r.consent
    ? await refuse(sql`'no consent: a contact with this address has not opted in'`, rules.lacksConsent(address))
    : [];
  const refusedRows = [...suppressed, ...unconsented];
  if (refusedRows.length > 0) {
    await db
      .insertInto('recipient_history')
      .values(refusedRows.map((row) => ({ recipient_id: Number(row.id), status: refused, at: r.now })))
      .execute();
    r.tally.add(r.accountId, r.channel, refused, { messages: refusedRows.length });
  }
  await sql`update send_recipients set due_at = null, reason = null, updated_at = ${now} where ${due}`.execute(db);
  return refusedRows;
}

/**
 * The recipients one range of an expansion refused (the range after `after` through
 * `through`, as expandRecipients answered it; null: to the end), with their reasons: for a
 * channel that posts them (email's Dropped is a word of SPEC §3).
 */
export async function refusedInRange(
  db: Db,
  channel: Channel,
  sendId: string,
  after: string | null,
  through: string | null,
) {
  let select = db
    .selectFrom('send_recipients')
    .select(['id', 'address', 'reason'])
    .where('send_id', '=', sendId)
    .where('status', '=', CHANNEL[channel].refused);
  if (after !== null) select = select.where('address', '>', after);
  if (through !== null) select = select.where('address', '<=', through);
  return select.orderBy('id').execute();
}

/**
 * The listIds that are not the account's (422s): another account's list is as unknown as a missing
 * one, nothing tells them apart.
 */
export async function listProblems(
  db: Db,
  accountId: string,
  listIds: string[],
  field = 'listId',
): Promise<FieldError[]> {
  if (listIds.length === 0) return [];
  const rows = await db
    .selectFrom('contact_lists')
    .select('id')
    .where('account_id', '=', accountId)
    .where('id', 'in', listIds)
    .execute();
  const known = new Set(rows.map((row) => row.id));
  return unknownLists(
    listIds.filter((id) => !known.has(id)),
    field,
  );
}

/** The 422's problems of listIds that are not the account's lists. */
export const unknownLists = (listIds: string[], field: string): FieldError[] =>
  listIds.map((id) => ({ field, message: `holds ${id}, which is not a list of this account` }));

/** Whether the account may send to an address now, and the contact whose properties fill its tags. */
export interface AddressStanding {
  /** Why not, in words (the address is suppressed, or a contact with it lacks the opt-in); undefined if it may. */
  refusal: string | undefined;
  /** The account's most recently updated contact with the address (SPEC §2.2 rule 4), or null. */
  contactId: number | null;
}

/**
 * An address settled at once rather than by a worker's expansion: `/sms/single` answers 422
 * with the refusal, so a one-time passcode never vanishes behind a 202, and an immediate one
 * is stored already expanded (its contact found here), so its worker only reads and sends.
 * `optIn: false` (Verify's codes, which are not marketing): only a suppression refuses, an
 * erased person's (by the address's keyed hash, `erasureKey`) as any other.
 */
export async function addressStanding(
  db: Db,
  channel: Channel,
  accountId: string,
  address: string,
  options: { optIn: boolean; erasureKey: Buffer },
): Promise<AddressStanding> {
  const standing = await standingChecks(db, channel).run({
    accountId,
    address,
    erasedHash: erasedAddress(options.erasureKey, address),
  });
  const contactId = standing.contact_id === null ? null : Number(standing.contact_id);
  if (standing.suppressed !== null) return { refusal: `is suppressed (${standing.suppressed})`, contactId };
  const lacking = options.optIn && standing.lacking !== null;
  return {
    refusal: lacking ? `belongs to a contact whose ${CHANNEL[channel].optInField} is false` : undefined,
    contactId,
  };
}

/**
 * An address's standing as read: its account's most recent contact with it, whether a
 * contact with it lacks the opt-in (non-null if so), and the suppression's reason.
 */
interface StandingRow {
  contact_id: number | string | null;
  lacking: number | null;
  suppressed: string | null;
}

// The checks of requests that arrive while one is being read go together as the next group
// (db/gathering.ts): on PostgreSQL a passcode's check was every other round trip under load. On
// SQLite, where a read ends at once, those of one event-loop turn go together.
const standingGroups = new WeakMap<Db, Record<Channel, Gathering<StandingKey, StandingRow>>>();

function standingChecks(db: Db, channel: Channel): Gathering<StandingKey, StandingRow> {
  let checks = standingGroups.get(db);
  if (!checks) {
    const read = (of: Channel) => async (keys: StandingKey[]) =>
      (await standingsRead(dialectOf(db), of, keys).execute(db)).rows;
    const options = { maxSize: GROUP_SIZE, waitForTurn: SYNCHRONOUS_READS[dialectOf(db)] };
    checks = { sms: new Gathering(read('sms'), options), email: new Gathering(read('email'), options) };
    standingGroups.set(db, checks);
  }
  return checks[channel];
}

/**
 * The standing of each key's address in its account, a row each in the keys' order. Every
 * lookup is a subquery by key, run for each key (a join could be planned as a scan of the
 * table), so one plan serves any group whatever the tables hold: planned once (PLAN_ONCE).
 */
export function standingsRead(dialect: DialectName, channel: Channel, keys: readonly StandingKey[]) {
  const { address, optIn } = CHANNEL[channel];
  const contacts = sql`from contacts c where c.account_id = k.account_id and c.${sql.raw(address)} = k.address`;
  return sql<StandingRow>`${sql.raw(PLAN_ONCE)}
    select (select c.id ${contacts} order by c.updated_at desc, c.id desc limit 1) as contact_id,
           (select 1 ${contacts} and not c.${sql.raw(optIn)} limit 1) as lacking,
           coalesce((select s.reason from suppressions s
                      where s.account_id = k.account_id and s.channel = ${channel} and s.address = k.address),
                    (select e.reason from erased_suppressions e
                      where e.account_id = k.account_id and e.channel = ${channel} and e.hash = k.hash)) as suppressed
      from ${queries[dialect].standingKeys(keys)}
     order by k.i`;
}

/**
 * The recipients of a page's `outcomes` its record's update left (`written`: the rows its
 * RETURNING answered): those no longer to be written since the page was read (an erasure ended
 * them, ERASED_REASON; for email, a bounce report ended a retry in flight), or gone altogether
 * (their send deleted meanwhile).
 */
export function leftOut(
  outcomes: ReadonlyArray<{ id: number }>,
  written: ReadonlyArray<{ id: number | string }>,
): Set<number> {
  const kept = new Set(written.map((row) => Number(row.id)));
  return new Set(outcomes.filter(({ id }) => !kept.has(id)).map(({ id }) => id));
}

/**
 * `items` but those of the recipients in `left` (leftOut's answer, or a record's own), each
 * item's recipient given by `recipientOf` (with its index, for a list that follows another).
 */
export const withoutRecipients = <T>(
  items: T[],
  left: ReadonlySet<number>,
  recipientOf: (item: T, i: number) => number,
): T[] => (left.size === 0 ? items : items.filter((item, i) => !left.has(recipientOf(item, i))));
