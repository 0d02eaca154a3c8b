import type { Kysely, Selectable } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Database, DialectName } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import type { ContactBatchesTable, Schema } from '../db/schema.ts';
import type { Lease } from '../queue/queries.ts';
import { completeJob, SnoozeJob, type Job, type JobHandler, type JobRun } from '../queue/worker.ts';
import { emitEvent } from '../webhooks/outbox.ts';
import { batchView, unpackEntries, type BatchJob } from './batches.ts';
import {
  addListMembers,
  allocateContactIds,
  insertContacts,
  loadCandidates,
  lockAccountContacts,
  updateContactData,
  updateContacts,
  type CandidateKeys,
  type CandidateRow,
  type ContactRow,
  type ListMember,
} from './queries.ts';
import type { BatchEntry } from './validate.ts';

type Db = Kysely<Schema>;
type BatchRow = Selectable<ContactBatchesTable>;

/** The webhook event type of an applied (or failed) batch. */
export const BATCH_WEBHOOK_TYPE = 'contacts.batch';

/**
 * The batch is no longer Queued (deleted with its account, or Failed before an operator revived its
 * job): this run's writes roll back.
 */
class NotQueued extends Error {}

/** A contact while the batch is resolved against it, in memory. */
interface Draft {
  /** 0 until a new contact is given its id. */
  id: number;
  /** A new contact whose id the client chose with contactId. */
  chosenId: boolean;
  email: string | null;
  mobile: string | null;
  countryCode: string | null;
  mobileOptIn: boolean;
  emailOptIn: boolean;
  properties: Record<string, string>;
  /** A stored contact's row as it was before the batch; undefined for one the batch creates. */
  before: ContactRow | undefined;
  /** In the batch's list before the batch. */
  inList: boolean;
  /** Creation order of the batch's new contacts, which come after every stored one. */
  createdSeq: number;
}

const keyOf = (mobile: string | null, email: string | null) => `${mobile ?? ''}\n${email ?? ''}`;

const rowOf = (d: Draft): ContactRow => ({
  id: d.id,
  email: d.email,
  mobile: d.mobile,
  countryCode: d.countryCode,
  mobileOptIn: d.mobileOptIn,
  emailOptIn: d.emailOptIn,
  properties: JSON.stringify(d.properties),
});

/** When several contacts share one (mobile, email), the oldest is the one a batch entry matches. */
const precedes = (a: Draft, b: Draft) =>
  a.before && b.before ? a.id < b.id : a.before ? true : b.before ? false : a.createdSeq < b.createdSeq;

/**
 * Contacts by id and by their exact (mobile, email) pair. The pair, null included, is
 * all the matching rules of SPEC §4 rule 4 look at: mobile and email → that pair; mobile
 * only → (mobile, null); email only → (null, email).
 */
class Drafts {
  readonly byId = new Map<number, Draft>();
  private readonly byKey = new Map<string, Draft[]>();

  add(draft: Draft): void {
    if (draft.id !== 0) this.byId.set(draft.id, draft);
    this.index(draft);
  }

  match(mobile: string | null, email: string | null): Draft | undefined {
    return this.byKey.get(keyOf(mobile, email))?.[0];
  }

  /** Writes an entry over a contact: omitted fields keep their values. */
  write(draft: Draft, entry: BatchEntry): void {
    const oldKey = keyOf(draft.mobile, draft.email);
    if (entry.email !== undefined) draft.email = entry.email;
    if (entry.mobile !== undefined) {
      draft.mobile = entry.mobile;
      draft.countryCode = entry.countryCode ?? null;
    }
    if (entry.mobileOptIn !== undefined) draft.mobileOptIn = entry.mobileOptIn;
    if (entry.emailOptIn !== undefined) draft.emailOptIn = entry.emailOptIn;
    if (entry.properties !== undefined) Object.assign(draft.properties, entry.properties);
    if (keyOf(draft.mobile, draft.email) !== oldKey) {
      const old = this.byKey.get(oldKey)!;
      old.splice(old.indexOf(draft), 1);
      this.index(draft);
    }
  }

  private index(draft: Draft): void {
    const key = keyOf(draft.mobile, draft.email);
    const same = this.byKey.get(key);
    if (!same) this.byKey.set(key, [draft]);
    else {
      const at = same.findIndex((other) => precedes(draft, other));
      same.splice(at === -1 ? same.length : at, 0, draft);
    }
  }
}

function storedDraft(row: CandidateRow): Draft {
  const before: ContactRow = {
    id: Number(row.id),
    email: row.email,
    mobile: row.mobile,
    countryCode: row.mobile_country_code,
    mobileOptIn: Boolean(row.mobile_opt_in),
    emailOptIn: Boolean(row.email_opt_in),
    properties: row.properties,
  };
  return {
    id: before.id,
    chosenId: false,
    email: row.email,
    mobile: row.mobile,
    countryCode: row.mobile_country_code,
    mobileOptIn: before.mobileOptIn,
    emailOptIn: before.emailOptIn,
    properties: JSON.parse(row.properties) as Record<string, string>,
    before,
    inList: Boolean(row.in_list),
    createdSeq: 0,
  };
}

/**
 * The stored contacts any entry could reach: by contactId, or by its exact pair. Each key once:
 * the lookups join each key to the contacts it matches, so a key given by 1,000 entries and
 * held by 1,000 contacts would load a million rows.
 */
export function candidateKeys(
  accountId: string,
  listId: string,
  allContactsListId: string,
  entries: BatchEntry[],
): CandidateKeys {
  const ids = new Set<number>();
  const pairs = new Map<string, { mobile: string; email: string }>();
  const mobiles = new Set<string>();
  const emails = new Set<string>();
  for (const entry of entries) {
    if (entry.contactId !== undefined) ids.add(entry.contactId);
    else if (entry.mobile !== undefined && entry.email !== undefined) {
      pairs.set(`${entry.mobile}\n${entry.email}`, { mobile: entry.mobile, email: entry.email });
    } else if (entry.mobile !== undefined) mobiles.add(entry.mobile);
    else if (entry.email !== undefined) emails.add(entry.email);
  }
  return {
    accountId,
    listId,
    allContactsListId,
    ids: [...ids],
    pairs: [...pairs.values()],
    mobiles: [...mobiles],
    emails: [...emails],
  };
}

/**
 * Applies the entries in order, in memory, to the stored contacts they can reach, as if
 * one at a time: an entry sees what earlier entries of the batch did, so two entries
 * that reach one contact (the same pair, or a contactId and then the pair it was given)
 * write to one contact, the later winning field by field. Returns the contacts the batch
 * reached, in the order it first reached them; new ones have id 0 unless a contactId named it.
 *
 * Only an entry with a contactId changes a contact's mobile or email (elsewhere the match
 * is by them), so the contacts loaded by contactId or by the entries' exact pairs are
 * every contact any entry can reach.
 */
export function resolveEntries(entries: BatchEntry[], stored: CandidateRow[]): Draft[] {
  const drafts = new Drafts();
  for (const row of stored) if (!drafts.byId.has(Number(row.id))) drafts.add(storedDraft(row));
  const reached = new Set<Draft>();
  const order: Draft[] = [];
  let created = 0;
  for (const entry of entries) {
    let draft =
      entry.contactId !== undefined
        ? drafts.byId.get(entry.contactId)
        : drafts.match(entry.mobile ?? null, entry.email ?? null);
    if (!draft) {
      draft = {
        id: entry.contactId ?? 0,
        chosenId: entry.contactId !== undefined,
        email: null,
        mobile: null,
        countryCode: null,
        mobileOptIn: false, // ARCHITECTURE.md: a contact created without an opt-in has no consent
        emailOptIn: false,
        properties: {},
        before: undefined,
        inList: false,
        createdSeq: ++created,
      };
      drafts.add(draft);
    }
    drafts.write(draft, entry);
    if (!reached.has(draft)) {
      reached.add(draft);
      order.push(draft);
    }
  }
  return order;
}

/** A ContactRow's fields, and those of them that identify a contact. */
const FIELDS: ReadonlyArray<keyof ContactRow> = [
  'id',
  'email',
  'mobile',
  'countryCode',
  'mobileOptIn',
  'emailOptIn',
  'properties',
];
const IDENTITY: ReadonlyArray<keyof ContactRow> = ['email', 'mobile', 'countryCode'];

export interface BatchResult {
  inserted: number[];
  updated: number[];
  skipped: number[];
}

/**
 * One batch, in the caller's transaction: the stored contacts it can reach in one query,
 * the entries resolved in memory, then one statement per kind of write. A contact counts
 * once: inserted, updated, or skipped when the batch left its data and memberships
 * exactly as they were (then nothing is written and updatedAt stays).
 */
export async function applyBatch(
  db: Db,
  dialect: DialectName,
  now: number,
  target: { accountId: string; listId: string },
  entries: BatchEntry[],
): Promise<BatchResult> {
  const { accountId, listId } = target;
  const allContacts = await lockAccountContacts(db, dialect, accountId);
  const stored = await loadCandidates(db, dialect, candidateKeys(accountId, listId, allContacts, entries));
  const drafts = resolveEntries(entries, stored);

  const created = drafts.filter((d) => d.before === undefined);
  const reserved = new Set(created.filter((d) => d.chosenId).map((d) => d.id));
  for (let pending = created; pending.length > 0; ) {
    const unnumbered = pending.filter((d) => d.id === 0);
    const ids = await allocateContactIds(db, accountId, unnumbered.length, reserved);
    for (const [i, d] of unnumbered.entries()) d.id = ids[i];
    const inserted = await insertContacts(db, dialect, accountId, now, pending.map(rowOf));
    pending = pending.filter((d) => !inserted.has(d.id));
    for (const d of pending) {
      // A chosen id was not among the candidates, and the account's batches apply one at a time.
      if (d.chosenId) throw new Error(`contactId ${d.id} appeared while its batch was applied`);
      d.id = 0; // the client took that id: draw another
    }
  }

  const result: BatchResult = { inserted: [], updated: [], skipped: [] };
  const rewrites: ContactRow[] = [];
  const dataUpdates: ContactRow[] = [];
  const members: ListMember[] = [];
  for (const d of drafts) {
    if (d.before === undefined) {
      result.inserted.push(d.id);
      if (listId !== allContacts) members.push({ listId, contactId: d.id });
      continue;
    }
    const row = rowOf(d);
    const changed = FIELDS.some((field) => row[field] !== d.before![field]);
    if (!changed && d.inList) {
      result.skipped.push(d.id);
      continue;
    }
    result.updated.push(d.id);
    if (IDENTITY.some((field) => row[field] !== d.before![field])) rewrites.push(row);
    else dataUpdates.push(row);
    if (!d.inList) members.push({ listId, contactId: d.id });
  }

  await updateContacts(db, dialect, accountId, now, rewrites);
  await updateContactData(db, dialect, accountId, now, dataUpdates);
  await addListMembers(db, dialect, now, members);
  return result;
}

async function finish(db: Db, now: number, batchId: string, values: Partial<BatchRow>): Promise<BatchRow | undefined> {
  const row = await db
    .updateTable('contact_batches')
    .set({ ...values, completed_at: now })
    .where('id', '=', batchId)
    .where('status', '=', 'Queued')
    .returningAll()
    .executeTakeFirst();
  // SPEC §6: one post per batch, with its counts and contact ids: the status read's body.
  if (row) {
    const clock: Clock = { now: () => now };
    await emitEvent(db, clock, {
      accountId: row.account_id,
      url: row.webhook_url,
      type: BATCH_WEBHOOK_TYPE,
      data: batchView(row),
    });
  }
  return row;
}

interface ApplyJob {
  lease: Lease;
  accountId: string;
  payload: BatchJob;
  /** The time of the run: the batch's start and completion, and its contacts' updatedAt. */
  now: number;
}

/**
 * Whether a batch of the account accepted before this one is still queued: its job was set back
 * (its worker died, or an attempt failed) behind this one's, or its API process's clock was ahead
 * of this one's. This one waits for it, or a later batch's values (an opt-out) would be
 * overwritten by an earlier one's. Accepted before: by the database's order (accept_order),
 * never by a process's clock. A seek on contact_batches_queued_account.
 */
async function olderBatchQueued(db: Db, accountId: string, batchId: string): Promise<boolean> {
  const batch = await db
    .selectFrom('contact_batches')
    .select('accept_order')
    .where('id', '=', batchId)
    .executeTakeFirst();
  if (!batch) return false;
  const older = await db
    .selectFrom('contact_batches')
    .select('id')
    .where('account_id', '=', accountId)
    .where('status', '=', 'Queued')
    .where('accept_order', '<', batch.accept_order)
    .limit(1)
    .executeTakeFirst();
  return older !== undefined;
}

/**
 * One run of a batch's job, in one transaction: the batch applied, its result recorded,
 * its webhook post queued and its job completed; or, for a batch no longer Queued,
 * nothing. Runs where the data is (database.call): on SQLite, on the database's thread.
 */
export const applyBatchJob = procedure(
  import.meta.url,
  'applyBatchJob',
  async ({ db, dialect }, run: ApplyJob): Promise<'applied' | 'not queued' | 'behind'> => {
    if (await olderBatchQueued(db, run.accountId, run.payload.batchId)) return 'behind';
    try {
      await db.transaction().execute(async (trx) => {
        const result = await applyBatch(
          trx,
          dialect,
          run.now,
          { accountId: run.accountId, listId: run.payload.listId },
          unpackEntries(run.payload),
        );
        const done = await finish(trx, run.now, run.payload.batchId, {
          status: 'Completed',
          started_at: run.now,
          inserted_ids: JSON.stringify(result.inserted),
          updated_ids: JSON.stringify(result.updated),
          skipped_ids: JSON.stringify(result.skipped),
        });
        if (!done) throw new NotQueued();
        await completeJob(trx, run.lease);
      });
      return 'applied';
    } catch (error) {
      if (error instanceof NotQueued) return 'not queued';
      throw error;
    }
  },
);

/** How long a batch waits before it looks again for the older batch of its account to be applied. */
const BEHIND_WAIT_MS = 1_000;

/**
 * The `contacts.batch` job. A failed attempt changes nothing and is retried by the queue;
 * a batch whose job dies (onDead: its last attempt failed, or it kept killing its worker)
 * is marked Failed, and that posted. While it runs the batch reads as Processing
 * (findBatch asks the job), so no write announces the start.
 */
export function contactBatchHandler(deps: { database: Database; clock: Clock }): JobHandler {
  const { database, clock } = deps;
  return {
    async handle(job: Job, run: JobRun) {
      const outcome = await database.call(applyBatchJob, {
        lease: run.lease,
        accountId: job.accountId!,
        payload: job.payload as BatchJob,
        now: clock.now(),
      });
      if (outcome === 'applied') return 'completed';
      if (outcome === 'behind')
        throw new SnoozeJob(clock.now() + BEHIND_WAIT_MS, 'an older batch of the account is queued');
    },
    async onDead(trx: Db, job: Job, error: string) {
      const now = clock.now();
      await finish(trx, now, (job.payload as BatchJob).batchId, {
        status: 'Failed',
        started_at: now,
        error: `not applied after ${job.attempt} attempts: ${error}`,
      });
    },
  };
}
