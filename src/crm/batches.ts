import { v7 as uuidv7 } from 'uuid';
import type { Kysely, Selectable } from 'kysely';
import { isoOrNull, type Clock } from '../clock.ts';
import type { DialectName } from '../db/database.ts';
import type { ContactBatchesTable, ContactBatchStatus, Schema } from '../db/schema.ts';
import { AppError, notFound, unprocessable, type FieldError } from '../errors.ts';
import { postProcedure } from '../http/idempotency.ts';
import { enqueue, PRIORITY } from '../queue/queue.ts';
import { inJson } from '../db/in-json.ts';
import type { ContactBatchRequest } from './schemas.ts';
import { lockNamedLists, NEXT_ACCEPT_ORDER } from './queries.ts';
import { defaultListId, findListId, nameKey } from './setup.ts';
// Types only: validate.ts loads libphonenumber's metadata, and the database thread, which
// imports this module for its procedures (src/server/procedures.ts), has no use for it.
import type { BatchEntry, CheckedEntry } from './validate.ts';

type Db = Kysely<Schema>;
type BatchRow = Selectable<ContactBatchesTable>;

/** The queue kind that applies a batch; its payload is a BatchJob. */
export const CONTACT_BATCH_KIND = 'contacts.batch';

/**
 * A batch that cannot apply will not apply on a retry either (a database that is down
 * will): ten attempts, 1 s doubling (nine waits, 511 s), cover about 8.5 minutes of outage
 * before it is Failed.
 */
const MAX_ATTEMPTS = 10;

/**
 * A batch's entries as its job stores them, until it is applied: each one an array
 * [contactId, email, mobile, countryCode, mobileOptIn, emailOptIn, properties] with null
 * for an absent field, and properties as [index into propertyIds, value, …]. As objects
 * keyed by property id, 1,000 contacts with 3 properties were 280 kB of JSON to write,
 * read back and parse; packed, 106 kB.
 */
export interface BatchJob {
  batchId: string;
  listId: string;
  propertyIds: string[];
  contacts: PackedEntry[];
}

type PackedEntry = [
  number | null,
  string | null,
  string | null,
  string | null,
  boolean | null,
  boolean | null,
  Array<number | string> | null,
];

export function packEntries(batchId: string, listId: string, entries: BatchEntry[]): BatchJob {
  const propertyIds: string[] = [];
  const index = new Map<string, number>();
  const contacts = entries.map((e): PackedEntry => {
    let properties: Array<number | string> | null = null;
    if (e.properties) {
      properties = [];
      for (const [id, value] of Object.entries(e.properties)) {
        let i = index.get(id);
        if (i === undefined) {
          i = propertyIds.push(id) - 1;
          index.set(id, i);
        }
        properties.push(i, value);
      }
    }
    return [
      e.contactId ?? null,
      e.email ?? null,
      e.mobile ?? null,
      e.countryCode ?? null,
      e.mobileOptIn ?? null,
      e.emailOptIn ?? null,
      properties,
    ];
  });
  return { batchId, listId, propertyIds, contacts };
}

export function unpackEntries(job: BatchJob): BatchEntry[] {
  return job.contacts.map(([contactId, email, mobile, countryCode, mobileOptIn, emailOptIn, properties]) => {
    const entry: BatchEntry = {};
    if (contactId !== null) entry.contactId = contactId;
    if (email !== null) entry.email = email;
    if (mobile !== null) entry.mobile = mobile;
    if (countryCode !== null) entry.countryCode = countryCode;
    if (mobileOptIn !== null) entry.mobileOptIn = mobileOptIn;
    if (emailOptIn !== null) entry.emailOptIn = emailOptIn;
    if (properties !== null) {
      entry.properties = {};
      for (let i = 0; i < properties.length; i += 2)
        entry.properties[job.propertyIds[properties[i] as number]] = properties[i + 1] as string;
    }
    return entry;
  });
}

export interface Outcome {
  count: number;
  contactIds: number[];
}

export interface BatchView {
  batchId: string;
  status: ContactBatchStatus;
  listId: string;
  contacts: number;
  inserted: Outcome | null;
  updated: Outcome | null;
  skipped: Outcome | null;
  error: string | null;
  /** A queued batch whose job has failed and will be tried again; null otherwise. */
  retrying: Retrying | null;
  createdAt: string;
  completedAt: string | null;
}

export interface Retrying {
  failedAttempts: number;
  maxAttempts: number;
  lastError: string;
  nextAttemptAt: string;
}

const outcome = (ids: string | null): Outcome | null => {
  if (ids === null) return null;
  const contactIds = JSON.parse(ids) as number[];
  return { count: contactIds.length, contactIds };
};

export function batchView(
  row: BatchRow,
  status: ContactBatchStatus = row.status,
  retrying: Retrying | null = null,
): BatchView {
  return {
    batchId: row.id,
    status,
    listId: row.list_id,
    contacts: row.contact_count,
    inserted: outcome(row.inserted_ids),
    updated: outcome(row.updated_ids),
    skipped: outcome(row.skipped_ids),
    error: row.error,
    retrying,
    createdAt: new Date(row.created_at).toISOString(),
    completedAt: isoOrNull(row.completed_at),
  };
}

export async function findBatch(db: Db, accountId: string, batchId: string): Promise<BatchView> {
  const row = await db
    .selectFrom('contact_batches')
    .selectAll()
    .where('id', '=', batchId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  if (!row) throw notFound('The contact batch');
  if (row.status !== 'Queued') return batchView(row);
  // A queued batch whose job a worker holds is being applied; one whose job failed says so,
  // rather than reading Queued with no word while its retries run out.
  const job = await db
    .selectFrom('jobs')
    .select(['state', 'attempts', 'max_attempts', 'last_error', 'run_at'])
    .where('idempotency_key', '=', jobKey(row.id))
    .executeTakeFirst();
  if (job?.state === 'running') return batchView(row, 'Processing');
  const retrying =
    job?.state === 'ready' && job.last_error !== null && job.attempts > 0
      ? {
          failedAttempts: job.attempts,
          maxAttempts: job.max_attempts,
          lastError: job.last_error,
          nextAttemptAt: new Date(job.run_at).toISOString(),
        }
      : null;
  return batchView(row, 'Queued', retrying);
}

const jobKey = (batchId: string) => `${CONTACT_BATCH_KIND}:${batchId}`;

function rejection(formatErrors: FieldError[], dataErrors: FieldError[], invalidProperties: string[]): AppError {
  const errors = [...formatErrors, ...dataErrors];
  // SPEC §2.6's shape. No contactId can be invalid: ids are per account, and one the account
  // does not have creates that contact.
  const data = { InvalidProperties: invalidProperties, InvalidContactIds: [] };
  const message =
    `The contact batch was rejected with ${errors.length} ` +
    `problem${errors.length === 1 ? '' : 's'}; nothing was applied.`;
  // ARCHITECTURE.md: a malformed field is a 400, a well-formed reference to something the
  // account does not have a 422. One answer lists every problem of both kinds.
  if (formatErrors.length > 0) return new AppError(400, message, { errors, data });
  return unprocessable(message, errors, data);
}

/** A batch checked against the account and ready to record: plain data, as a procedure's arguments are. */
export interface PreparedBatch {
  batchId: string;
  accountId: string;
  listId: string;
  webhookUrl: string | null;
  job: BatchJob;
  acceptedAt: number;
}

/**
 * Checks the batch against the account's lists and properties, and resolves
 * property names to ids. Only reads, run before the request's transaction opens: on SQLite
 * the one connection is held by a transaction from its first statement to its commit, and
 * little read here can be undone under the batch: properties are never deleted, and a list is
 * not deleted while a queued batch names it (messaging/deletions.ts), and one deleted between
 * this read and the batch's record refuses the batch there (recordBatch).
 * Throws, listing every problem, if the batch cannot be accepted.
 */
export async function prepareBatch(
  db: Db,
  deps: { dialect: DialectName; clock: Clock },
  accountId: string,
  request: ContactBatchRequest,
  checked: { entries: CheckedEntry[]; errors: FieldError[] },
): Promise<PreparedBatch> {
  const { dialect } = deps;
  const dataErrors: FieldError[] = [];

  let listId: string | undefined;
  if (request.listId === undefined) listId = await defaultListId(db, accountId);
  else {
    listId = await findListId(db, accountId, request.listId.toLowerCase());
    if (!listId) dataErrors.push({ field: 'listId', message: 'is not a list of this account' });
  }

  const refs = checked.entries.flatMap((entry) => entry.propertyRefs);
  const askedIds = [...new Set(refs.flatMap((ref) => (ref.id === undefined ? [] : [ref.id])))];
  const askedNames = [...new Set(refs.flatMap((ref) => (ref.name === undefined ? [] : [nameKey(ref.name)])))];
  const known =
    refs.length === 0
      ? []
      : await db
          .selectFrom('contact_properties')
          .select(['id', 'name_key'])
          .where('account_id', '=', accountId)
          .where((eb) =>
            eb.or([eb('id', 'in', inJson(dialect, askedIds)), eb('name_key', 'in', inJson(dialect, askedNames))]),
          )
          .execute();
  const idsKnown = new Set(known.map((p) => p.id));
  const idByName = new Map(known.map((p) => [p.name_key, p.id]));
  const invalidProperties = new Set<string>();

  const entries = checked.entries.map(({ propertyRefs, ...entry }): BatchEntry => {
    if (propertyRefs.length === 0) return entry;
    const properties: Record<string, string> = {};
    for (const ref of propertyRefs) {
      const id = ref.id !== undefined ? (idsKnown.has(ref.id) ? ref.id : undefined) : idByName.get(nameKey(ref.name!));
      if (id === undefined) {
        invalidProperties.add(ref.id ?? ref.name!);
        dataErrors.push({ field: ref.field, message: 'is not a property of this account' });
      } else {
        properties[id] = ref.value;
      }
    }
    return { ...entry, properties };
  });

  if (checked.errors.length > 0 || dataErrors.length > 0) {
    throw rejection(checked.errors, dataErrors, [...invalidProperties]);
  }
  // Time-ordered, and in order within a millisecond: the account's batches apply in that order (apply.ts).
  const batchId = uuidv7();
  return {
    batchId,
    accountId,
    listId: listId!,
    webhookUrl: request.webhookUrl ?? null,
    job: packEntries(batchId, listId!, entries),
    acceptedAt: deps.clock.now(),
  };
}

/**
 * Records a prepared batch and queues its job, in the request's idempotency transaction:
 * the 202, the batch and its job commit together. A procedure, so on SQLite the
 * transaction runs on the database's thread in one go. Its list, found by its checks, is
 * locked until the commit, and a list deleted since is the checks' 422 (queries.ts,
 * lockNamedLists).
 */
export const recordBatch = postProcedure(
  import.meta.url,
  'recordBatch',
  async ({ db, dialect }, batch: PreparedBatch) => {
    const [list] = await lockNamedLists(db, dialect, [batch.listId]);
    if (list?.account_id !== batch.accountId) {
      throw rejection([], [{ field: 'listId', message: 'is not a list of this account' }], []);
    }
    await db
      .insertInto('contact_batches')
      .values({
        id: batch.batchId,
        account_id: batch.accountId,
        list_id: batch.listId,
        webhook_url: batch.webhookUrl,
        status: 'Queued',
        contact_count: batch.job.contacts.length,
        inserted_ids: null,
        updated_ids: null,
        skipped_ids: null,
        error: null,
        created_at: batch.acceptedAt,
        started_at: null,
        completed_at: null,
        accept_order: NEXT_ACCEPT_ORDER[dialect],
      })
      .execute();
    await enqueue(db, {
      kind: CONTACT_BATCH_KIND,
      payload: batch.job,
      accountId: batch.accountId,
      now: batch.acceptedAt,
      idempotencyKey: jobKey(batch.batchId),
      maxAttempts: MAX_ATTEMPTS,
      priority: PRIORITY.contactBatch,
    });
    return { statusCode: 202, body: acceptedBody(batch.batchId) };
  },
);

/** SPEC §2.6: the body of the 202, exactly. */
export function acceptedBody(batchId: string) {
  return {
    status: 'Success' as const,
    message: 'The contact batch was accepted; its contacts will be created or updated shortly.',
    data: {
      BatchId: batchId,
      Processed: null,
      ContactId: null,
      InvalidProperties: [] as string[],
      InvalidContactIds: [] as number[],
    },
  };
}
