import { sql, type Kysely } from 'kysely';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { DialectName } from '../db/database.ts';
import type { Schema } from '../db/schema.ts';
import { defaultListId } from '../crm/setup.ts';
import { queries } from './queries.ts';
import { audienceRules, erasedAmong, nextRange, type Audience } from './recipients.ts';

type Db = Kysely<Schema>;

/** What a dry run looks at: the send's audience and the request's own recipients. */
export interface DryRunAudience extends Omit<Audience, 'allContactsListId'> {
  /** The request's own recipients in its order, an address given twice kept once. */
  recipients: Array<{ address: string; tags: Record<string, string> }>;
  /** How many recipients the request gave, repeats included. */
  given: number;
}

/** A recipient the send would reach, as the channel renders it (PageRow's fields that rendering reads). */
export interface WillSend {
  address: string;
  tags: string | null;
  properties: string | null;
}

/** ARCHITECTURE.md, "Preflight": `willSend` and the three `notSent` counts add up to `total`. */
export interface AudienceCount {
  total: number;
  willSend: number;
  notSent: { noConsent: number; suppressed: number; duplicate: number };
}

/**
 * Contact addresses a dry run reads at a time. SQLite's reads run on the calling thread
 * (db/sqlite.ts), so a range's statements there are a slice of the event loop: 250 addresses
 * keep a slice to a few milliseconds (2,000 stalled it up to 80 ms, and passcodes beside it
 * waited). PostgreSQL's run in its own process, and its next range is read while this one is
 * rendered: larger ranges spend fewer round trips.
 */
export const DRY_RUN_RANGE: Record<DialectName, number> = { sqlite: 250, postgres: 2000 };

/** What one address comes to: suppressed first, then consent, as the expansion decides it. */
interface Decided {
  address: string;
  properties: string | null;
  suppressed: string | null;
  no_consent: boolean | number;
}

/**
 * Counts who a send would reach, with the expansion's own rules (recipients.ts, audienceRules)
 * in read-only statements, and hands the recipients it would send to `visit` in the order the
 * send would send them: the request's own, then the lists' by address. Nothing is written and
 * nothing of a list is held: a range of addresses is read, decided, visited and let go. Not
 * one snapshot: a contact changed meanwhile is counted as it was when its range was read.
 */
export async function dryRunAudience(
  db: Db,
  dialect: DialectName,
  audience: DryRunAudience,
  visit: (recipients: WillSend[]) => void,
  rangeSize = DRY_RUN_RANGE[dialect],
): Promise<AudienceCount> {
  const a: Audience = {
    ...audience,
    allContactsListId: audience.listIds.length > 0 ? await defaultListId(db, audience.accountId) : '',
  };
  const rules = audienceRules(dialect, a);
  const given = new Map(
    audience.recipients.map((r) => [r.address, Object.keys(r.tags).length > 0 ? JSON.stringify(r.tags) : null]),
  );
  const count: AudienceCount = {
    total: audience.given,
    willSend: 0,
    notSent: { noConsent: 0, suppressed: 0, duplicate: audience.given - audience.recipients.length },
  };
  // Erased people's suppressions, found among the rows read rather than in their statement: a
  // list's range would otherwise be ranked once more for its addresses, doubling the dry run's
  // largest cost.
  const suppressErased = async (rows: Decided[]) => {
    const unsuppressed = rows.filter((row) => row.suppressed === null).map((row) => row.address);
    const reasons = new Map((await erasedAmong(db, a, unsuppressed)).map((e) => [e.address, e.reason]));
    for (const row of rows) row.suppressed ??= reasons.get(row.address) ?? null;
  };
  const decide = (rows: Decided[], tagsOf: (address: string) => string | null) => {
    const willSend: WillSend[] = [];
    for (const row of rows) {
      if (row.suppressed !== null) count.notSent.suppressed++;
      else if (Number(row.no_consent) === 1) count.notSent.noConsent++;
      else willSend.push({ address: row.address, tags: tagsOf(row.address), properties: row.properties });
    }
    count.willSend += willSend.length;
    visit(willSend);
  };

  for (let i = 0; i < audience.recipients.length; i += rangeSize) {
    const addresses = audience.recipients.slice(i, i + rangeSize).map((r) => r.address);
    const r = sql<string>`r.address`;
    const { rows } = await sql<Decided>`
      select r.address, ${rules.latestContact(r, 'properties')} as properties,
             ${rules.suppression(r, [])} as suppressed, ${rules.lacksConsent(r)} as no_consent
        from ${queries[dialect].addressTable(addresses)} r`.execute(db);
    await suppressErased(rows);
    const byAddress = new Map(rows.map((row) => [row.address, row]));
    decide(
      addresses.map((address) => byAddress.get(address)!),
      (address) => given.get(address) ?? null,
    );
    await nextTurn();
  }

  if (!rules.hasLists) return count;
  await queries[dialect].listsFresh(db);
  // Each range's reads are asked for before the one before it is decided and rendered, so the
  // database reads while this thread renders.
  const read = async (after: string | null) => {
    const range = await nextRange(db, dialect, a, after, rangeSize);
    const r = sql<string>`r.address`;
    const { rows } = await sql<Decided & { entries: number | string }>`
      select r.address, r.properties, r.entries, ${rules.suppression(r, [])} as suppressed,
             ${rules.lacksConsent(r)} as no_consent
        from (${rules.ranked(range, { entries: true })}) r
       where r.rank = 1
       order by r.address`.execute(db);
    await suppressErased(rows);
    return { through: range.through, rows };
  };
  for (let next = read(null); ; ) {
    const { through, rows } = await next;
    if (through !== null) {
      next = read(through);
      // Awaited on the next turn; handled here too, should this range's rendering throw first.
      next.catch(() => undefined);
    }
    // Every entry of an address but the one sent to is a duplicate, and all of them when the
    // request gave the address itself.
    const added = rows.filter((row) => !given.has(row.address));
    const entries = rows.reduce((sum, row) => sum + Number(row.entries), 0);
    count.total += entries;
    count.notSent.duplicate += entries - added.length;
    decide(added, () => null);
    if (through === null) return count;
    await nextTurn();
  }
}
