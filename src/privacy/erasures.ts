import { sql, type Expression, type Kysely, type RawBuilder, type SqlBool } from 'kysely';
import { lockAccountContacts } from '../crm/queries.ts';
import type { DialectName } from '../db/dialect.ts';
import { recordAudit, type AuditBy } from '../audit/entries.ts';
import { procedure } from '../db/procedure.ts';
import { postProcedure } from '../http/idempotency.ts';
import type { Schema } from '../db/schema.ts';
import { PENDING as EMAIL_PENDING } from '../email/record.ts';
import { EMAIL_EVENTS_TYPE, emailEvent } from '../email/events.ts';
import { ERASED_REASON, erasedAddress } from '../messaging/erased-identifiers.ts';
import { queries as messaging } from '../messaging/queries.ts';
import { UsageTally } from '../messaging/rollup.ts';
import { PRIORITY, enqueue } from '../queue/queue.ts';
import { ownPartAmong, RECEIPT_CLOCK_SKEW_MS, SMS_STATUS_TYPE, smsStatusEvent } from '../sms/receipts.ts';
import { NOT_SENT, SMS_PENDING } from '../sms/send.ts';
import { appendToStreams } from '../webhooks/events.ts';
import type { Person } from './person.ts';
import { redactedJson } from './redact.ts';

/**
 * Erasure (ARCHITECTURE.md, "Data rights and management"; docs/privacy.md): one person's number
 * and address go from every row of the account that held them. A row keeps its status and
 * counts, its identifier becomes the keyed hash (messaging/erased-identifiers.ts) and the text
 * sent to them goes. The request's transaction (beginErasure) suppresses them by hash and ends
 * their recipients not yet sent, so nothing in flight goes to them after the 202; a job then
 * works through the inventory (STEPS) in transactions of at most CHUNK rows, each found by an
 * index on the identifier, so erasing one person costs the same among ten million messages as
 * among ten. A step is done when it finds nothing left: a job killed halfway starts again at
 * the first step and passes over what is done.
 */

type Db = Kysely<Schema>;

export const ERASURE_KIND = 'privacy.erasure';

/** Rows a step changes in one transaction. */
const CHUNK = 500;

export interface ErasureJob {
  erasureId: string;
}

/** What a step is given: the account, the person's identifiers, and the key of their hashes. */
export interface ErasureArgs extends Person {
  accountId: string;
  erasureId: string;
  erasureKey: Buffer;
  now: number;
}

const hashesOf = (key: Buffer, person: Person) => ({
  sms: person.mobiles.map((m) => ({ clear: m, hash: erasedAddress(key, m) })),
  email: person.emails.map((e) => ({ clear: e, hash: erasedAddress(key, e) })),
});

/**
 * POST /privacy/erasures's transaction: the erasure's record, the person suppressed by hash on
 * both channels (an existing suppression's reason kept, its clear row gone), their recipients
 * not yet sent ended NotSent or Dropped, reason `erased` (posted with the hash, never the
 * number), and the job that erases the rest.
 */
export const beginErasure = postProcedure(
  import.meta.url,
  'beginErasure',
  async ({ db: trx, dialect }, args: ErasureArgs & { by: AuditBy; sealedIdentifiers: string }) => {
    await lockAccountContacts(trx, dialect, args.accountId);
    const hashes = hashesOf(args.erasureKey, args);
    let ended = 0;
    for (const channel of ['sms', 'email'] as const) {
      for (const { clear, hash } of hashes[channel]) {
        const kept = await trx
          .deleteFrom('suppressions')
          .where('account_id', '=', args.accountId)
          .where('channel', '=', channel)
          .where('address', '=', clear)
          .returning('reason')
          .executeTakeFirst();
        await trx
          .insertInto('erased_suppressions')
          .values({
            account_id: args.accountId,
            channel,
            hash,
            // A hard bounce's reason quotes the relay, which may quote the address.
            reason: kept ? kept.reason.replaceAll(clear, hash) : ERASED_REASON,
            created_at: args.now,
          })
          .onConflict((oc) => oc.columns(['account_id', 'channel', 'hash']).doNothing())
          .execute();
      }
      ended += await endUnsent(trx, dialect, args, channel, hashes[channel]);
    }
    await trx
      .insertInto('erasures')
      .values({
        id: args.erasureId,
        account_id: args.accountId,
        status: 'Processing',
        requested_by: args.by.actor,
        hashes: JSON.stringify([...hashes.sms, ...hashes.email].map((h) => h.hash)),
        sealed_identifiers: args.sealedIdentifiers,
        messages: ended,
        created_at: args.now,
        completed_at: null,
      })
      .execute();
    await recordAudit(trx, {
      ...args.by,
      accountId: args.accountId,
      action: 'erasure.requested',
      target: args.erasureId,
    });
    await enqueue(trx, {
      kind: ERASURE_KIND,
      payload: { erasureId: args.erasureId } satisfies ErasureJob,
      accountId: args.accountId,
      now: args.now,
      idempotencyKey: `${ERASURE_KIND}:${args.erasureId}`,
      maxAttempts: 10,
      // The CRM's lane: behind sends and webhooks, as a contact batch.
      priority: PRIORITY.contactBatch,
    });
    return { statusCode: 202, body: { erasureId: args.erasureId } };
  },
);

const UNSENT = {
  sms: {
    pending: SMS_PENDING,
    status: 'NotSent',
    type: SMS_STATUS_TYPE,
    event: (r: { send_id: string; message_id: string | null }, hash: string, at: number) =>
      smsStatusEvent({
        queueId: r.send_id,
        messageId: r.message_id,
        recipient: hash,
        status: 'Failed',
        errorCode: NOT_SENT,
        error: 'not sent: erased',
        parts: null,
        at,
      }),
  },
  email: {
    pending: EMAIL_PENDING,
    status: 'Dropped',
    type: EMAIL_EVENTS_TYPE,
    event: (r: { send_id: string; message_id: string | null }, hash: string, at: number) =>
      emailEvent({
        batchId: r.send_id,
        messageId: r.message_id,
        email: hash,
        event: 'Dropped',
        reason: ERASED_REASON,
        at,
      }),
  },
} as const;

/** The person's recipients on the channel not yet sent: ended, their address already the hash. */
async function endUnsent(
  trx: Db,
  dialect: DialectName,
  args: ErasureArgs,
  channel: 'sms' | 'email',
  identifiers: Array<{ clear: string; hash: string }>,
): Promise<number> {
  const unsent = UNSENT[channel];
  const tally = new UsageTally(args.now);
  let ended = 0;
  for (const { clear, hash } of identifiers) {
    const found = await recipientsOf(trx, dialect, args.accountId, channel, [clear], {
      pending: unsent.pending,
      limit: null,
    });
    if (found.length === 0) continue;
    const rows = await trx
      .updateTable('send_recipients')
      // Its hold and its next try go with it: a job that finds either would hand it over, or wait for it, again.
      .set({
        status: unsent.status,
        reason: ERASED_REASON,
        address: hash,
        tags: null,
        due_at: null,
        retry_at: null,
        // A relay's reply to an earlier try may quote the address (451 4.2.0 <ada@…>).
        error: sql<string>`replace(error, ${clear}, ${hash})`,
        updated_at: args.now,
      })
      .where(
        'id',
        'in',
        found.map((r) => r.id),
      )
      // A page's record that took the row first (PostgreSQL: this update waited for it) wrote
      // what was sent; the job then erases it with the rest.
      .where('status', 'in', unsent.pending)
      .returning(['id', 'send_id', 'message_id'])
      .execute();
    if (rows.length === 0) continue;
    ended += rows.length;
    tally.add(args.accountId, channel, unsent.status, { messages: rows.length });
    const ids = rows.map((r) => r.id);
    await trx.updateTable('recipient_history').set({ reply: null }).where('recipient_id', 'in', ids).execute();
    await trx
      .insertInto('recipient_history')
      .values(ids.map((id) => ({ recipient_id: id, status: unsent.status, at: args.now })))
      .execute();
    const sends = await trx
      .selectFrom('sends')
      .select(['id', 'webhook_url'])
      .where('id', 'in', [...new Set(rows.map((r) => r.send_id))])
      .execute();
    const urlOf = new Map(sends.map((send) => [send.id, send.webhook_url]));
    // Each send's per-request URL, and the account's endpoints (without one, only those).
    await appendToStreams(
      trx,
      { now: () => args.now },
      unsent.type,
      rows.map((r) => ({
        accountId: args.accountId,
        url: urlOf.get(r.send_id) ?? null,
        event: unsent.event(r, hash, args.now),
      })),
    );
  }
  await tally.write(trx, dialect);
  return ended;
}

/**
 * The account's recipients on the channel at these addresses (only those still `pending` when
 * given), at most `limit`: by the recipients' (address) index, each joined to its send, as the
 * searches read them (messaging/queries.ts, recipientsToSends: SQLite's planner would otherwise
 * walk every send of the account, 226 ms a request at 100,000 sends).
 */
async function recipientsOf(
  trx: Db,
  dialect: DialectName,
  accountId: string,
  channel: 'sms' | 'email',
  addresses: string[],
  options: { pending?: readonly string[]; limit: number | null },
): Promise<Array<{ id: number; send_id: string }>> {
  const { rows } = await sql<{ id: number; send_id: string }>`
    select r.id, r.send_id
      from send_recipients r ${messaging[dialect].recipientsToSends} sends s on s.id = r.send_id
     where r.address in (${sql.join(addresses)}) and s.account_id = ${accountId} and s.channel = ${channel}
       ${options.pending ? sql`and r.status in (${sql.join([...options.pending])})` : sql``}
       ${options.limit === null ? sql`` : sql`limit ${options.limit}`}`.execute(trx);
  return rows.map((r) => ({ id: Number(r.id), send_id: r.send_id }));
}

/** Where a step that reads in id order goes on from: the last id it read, or null at its start. */
interface Cursor {
  after: string | number | null;
}

/**
 * What a chunk of a step did: the rows it read (0: the step is done), the contacts it deleted
 * and the messages it erased (eraseChunk counts both on the erasure), and, for a step that
 * reads in id order, the cursor of the next chunk.
 */
export interface StepDone {
  rows: number;
  contacts?: number;
  messages?: number;
  next?: string | number;
}

/**
 * One step of the erasure's job: reads at most CHUNK rows. A step without a cursor finds what
 * is left by its match, which a row it changed no longer meets.
 */
type Step = (trx: Db, dialect: DialectName, args: ErasureArgs & Cursor) => Promise<StepDone>;

/** The inventory, in order (docs/privacy.md names each table). */
const STEPS: Record<string, Step> = {
  /**
   * Their recipients still unsent, ended as the request's transaction ended those it found:
   * a send accepted, or a campaign's recipients expanded, from a read of their suppressions
   * made before the erasure committed, and written after.
   */
  async unsent(trx, dialect, args) {
    const hashes = hashesOf(args.erasureKey, args);
    let ended = 0;
    for (const channel of ['sms', 'email'] as const)
      ended += await endUnsent(trx, dialect, args, channel, hashes[channel]);
    return { rows: ended, messages: ended };
  },
  /** The person's contacts and their memberships: their properties go with them. */
  async contacts(trx, dialect, args) {
    await lockAccountContacts(trx, dialect, args.accountId);
    const ids = (
      await trx
        .selectFrom('contacts')
        .select('id')
        .where('account_id', '=', args.accountId)
        .where((eb) => eb.or([eb('mobile', 'in', orNone(args.mobiles)), eb('email', 'in', orNone(args.emails))]))
        .limit(CHUNK)
        .execute()
    ).map((c) => c.id);
    if (ids.length === 0) return { rows: 0 };
    await trx
      .deleteFrom('list_members')
      .where('contact_id', 'in', ids)
      .where('list_id', 'in', (eb) =>
        eb.selectFrom('contact_lists').select('id').where('account_id', '=', args.accountId),
      )
      .execute();
    await trx.deleteFrom('contacts').where('account_id', '=', args.accountId).where('id', 'in', ids).execute();
    await trx
      .updateTable('sms_inbound')
      .set({ contact_id: null })
      .where('account_id', '=', args.accountId)
      .where('contact_id', 'in', ids)
      .execute();
    return { rows: ids.length, contacts: ids.length };
  },
  smsRecipients: (trx, dialect, args) => eraseRecipients(trx, dialect, args, 'sms', args.mobiles),
  emailRecipients: (trx, dialect, args) => eraseRecipients(trx, dialect, args, 'email', args.emails),
  /**
   * Suppressions of their number or address written since the erasure began (a STOP, an
   * unsubscribe or a bounce that came before their recipients were hashed, which records nothing
   * after): they stay suppressed by the hash.
   */
  async suppressions(trx, _dialect, args) {
    const deleted = await trx
      .deleteFrom('suppressions')
      .where('account_id', '=', args.accountId)
      .where((eb) =>
        eb.or([
          eb.and([eb('channel', '=', 'sms'), eb('address', 'in', orNone(args.mobiles))]),
          eb.and([eb('channel', '=', 'email'), eb('address', 'in', orNone(args.emails))]),
        ]),
      )
      .executeTakeFirst();
    return { rows: Number(deleted.numDeletedRows) };
  },
  /**
   * The sandbox's copies of what was sent to them: the text (or raw message) goes, and a Verify
   * code's copy, which its account's read opens, is left with nothing to open.
   */
  sandboxSms: (trx, _dialect, args) =>
    hashRows(trx, args, 'sandbox_sms', 'recipient', args.mobiles, { text: 'text', opens: false }),
  sandboxEmail: (trx, _dialect, args) =>
    hashRows(trx, args, 'sandbox_email', 'recipient', args.emails, { text: 'raw', opens: false }),
  /** What they wrote to the account: its text goes. */
  inbound: (trx, _dialect, args) => hashRows(trx, args, 'sms_inbound', 'sender', args.mobiles, { text: 'text' }),
  /** Their verifications and the sends of codes counted against their number or address. */
  verifications: (trx, _dialect, args) =>
    hashRows(trx, args, 'verifications', 'recipient', [...args.mobiles, ...args.emails]),
  verificationSends: (trx, _dialect, args) =>
    hashRows(trx, args, 'verification_sends', 'recipient', [...args.mobiles, ...args.emails]),
  /**
   * Events not yet gathered, then webhook bodies kept for retries and replay: the account's,
   * read whole (a LIKE cannot seek), rewritten where they name the person. Events first: one
   * gathered while its step runs is in a body the next step reads.
   */
  webhookEvents: (trx, _dialect, args) =>
    rewriteMatching(
      trx,
      args,
      { table: 'webhook_events', column: 'events' },
      anywhere,
      redactedJson(hashesOf(args.erasureKey, args)),
    ),
  webhookDeliveries: (trx, _dialect, args) =>
    rewriteMatching(
      trx,
      args,
      { table: 'webhook_deliveries', column: 'payload' },
      anywhere,
      redactedJson(hashesOf(args.erasureKey, args)),
    ),
  /**
   * Contact batches queued, or dead and waiting for a retry: the entries naming the person
   * leave the job, so no retry writes them back.
   */
  contactBatchJobs(trx, _dialect, args) {
    const mobiles = new Set(args.mobiles);
    const emails = new Set(args.emails);
    const batches = sql`and kind = 'contacts.batch' and state in ('ready', 'dead')`;
    const asValue = (identifier: string) => `%"${identifier}"%`;
    return rewriteMatching(trx, args, { table: 'jobs', column: 'payload', also: batches }, asValue, (text) => {
      const payload = JSON.parse(text) as { contacts: Array<[unknown, string | null, string | null]> };
      payload.contacts = payload.contacts.filter(
        ([, email, mobile]) => !(email !== null && emails.has(email)) && !(mobile !== null && mobiles.has(mobile)),
      );
      return JSON.stringify(payload);
    });
  },
};

/**
 * The next chunk, in id order after the step's cursor, of the account's rows of `table` whose
 * text `column` holds one of the identifiers (a LIKE by `pattern`), each rewritten by
 * `rewrite` where that changes it. The cursor, not the match, moves the step on: a row that
 * still names an identifier after its rewrite (in a field the rewrite leaves) is passed, not
 * read again for ever.
 */
async function rewriteMatching(
  trx: Db,
  args: ErasureArgs & Cursor,
  target: {
    table: 'webhook_deliveries' | 'webhook_events' | 'jobs';
    column: 'payload' | 'events';
    also?: RawBuilder<unknown>;
  },
  pattern: (identifier: string) => string,
  rewrite: (text: string) => string,
): Promise<StepDone> {
  const patterns = [...args.mobiles, ...args.emails].map(pattern);
  if (patterns.length === 0) return { rows: 0 };
  const text = sql.ref(target.column);
  const { rows } = await sql<{ id: string | number; text: string }>`
    select id, ${text} as text from ${sql.table(target.table)}
     where account_id = ${args.accountId} ${target.also ?? sql``}
       and (${sql.join(
         patterns.map((p) => sql`${text} like ${p}`),
         sql` or `,
       )})
       ${args.after === null ? sql`` : sql`and id > ${args.after}`}
     order by id
     limit ${CHUNK}`.execute(trx);
  for (const row of rows) {
    // Written over only as read: a gather that cut the row meanwhile (PostgreSQL) would have the
    // events it took written back and posted twice. Read again, and rewritten, until it holds.
    for (let held: string | undefined = row.text; held !== undefined; ) {
      const rewritten = rewrite(held);
      if (rewritten === held) break;
      const written = await sql`update ${sql.table(target.table)} set ${text} = ${rewritten}
                                 where id = ${row.id} and ${text} = ${held}`.execute(trx);
      if (Number(written.numAffectedRows ?? 0) > 0) break;
      const again = await sql<{ text: string }>`select ${text} as text from ${sql.table(target.table)}
                                                 where id = ${row.id}`.execute(trx);
      held = again.rows[0]?.text;
    }
  }
  return { rows: rows.length, next: rows.at(-1)?.id };
}

/**
 * A chunk of the account's rows of `table` whose `column` holds one of the identifiers: the
 * identifier becomes its hash and `emptied.text` (the text beside it, where there is one) goes,
 * with a sandbox copy's `opens` when given. Found by the table's (account_id, column) index.
 */
async function hashRows(
  trx: Db,
  args: ErasureArgs,
  table: 'sandbox_sms' | 'sandbox_email' | 'sms_inbound' | 'verifications' | 'verification_sends',
  column: 'recipient' | 'sender',
  identifiers: string[],
  emptied?: { text: 'text' | 'raw'; opens?: false },
): Promise<{ rows: number }> {
  if (identifiers.length === 0) return { rows: 0 };
  const held = sql.ref<string>(column);
  const result = await sql`
    update ${sql.table(table)}
       set ${held} = ${hashOfHeld(args.erasureKey, held, identifiers)}
           ${emptied === undefined ? sql`` : sql`, ${sql.ref(emptied.text)} = ''`}
           ${emptied?.opens === false ? sql`, opens = ${sql.lit(false)}` : sql``}
     where id in (select id from ${sql.table(table)}
                   where account_id = ${args.accountId} and ${held} in (${sql.join(identifiers)})
                   limit ${CHUNK})`.execute(trx);
  return { rows: Number(result.numAffectedRows ?? 0) };
}

export const ERASURE_STEPS = Object.keys(STEPS);

/**
 * `ref`, which holds one of `identifiers`, as that identifier's keyed hash. The hashes are made
 * here and the statement maps each identifier to its own: the key itself, sent with a statement,
 * would be in any server log that records parameters. A row another erasure of the same person
 * hashed meanwhile (PostgreSQL re-reads it after waiting) keeps its hash.
 */
const hashOfHeld = (key: Buffer, ref: Expression<string>, identifiers: readonly string[]) =>
  sql<string>`case ${ref} ${sql.join(
    identifiers.map((clear) => sql`when ${clear} then ${erasedAddress(key, clear)}`),
    sql` `,
  )} else ${ref} end`;

/** A LIKE pattern of an identifier anywhere in a text. */
const anywhere = (identifier: string) => `%${identifier}%`;

/** `in ()` is no SQL: an empty list becomes one value no row holds. */
const orNone = (values: string[]) => (values.length > 0 ? values : ['']);

/**
 * The person's recipients on a channel, of any status: the address becomes the hash, their tag
 * values and a reply's text go, with the user agents of their clicks, their identifier in the
 * URLs those clicks recorded, the numbers of their SMS submits and the receipts waiting for
 * their parts, and the text of a single send (it was for them alone). Found by the recipients'
 * (address) index, a chunk at a time; a chunk no longer matches once hashed.
 */
async function eraseRecipients(
  trx: Db,
  dialect: DialectName,
  args: ErasureArgs,
  channel: 'sms' | 'email',
  identifiers: string[],
): Promise<StepDone> {
  if (identifiers.length === 0) return { rows: 0 };
  const rows = await recipientsOf(trx, dialect, args.accountId, channel, identifiers, { limit: CHUNK });
  if (rows.length === 0) return { rows: 0 };
  const ids = rows.map((r) => r.id);
  const sendIds = [...new Set(rows.map((r) => r.send_id))];
  await trx.updateTable('recipient_history').set({ reply: null }).where('recipient_id', 'in', ids).execute();
  // A link a tag made personal (?email=[email]) names them in the URL its click recorded.
  for (const clear of identifiers) {
    await trx
      .updateTable('recipient_history')
      .set({ url: sql<string>`replace(url, ${clear}, ${erasedAddress(args.erasureKey, clear)})` })
      .where('recipient_id', 'in', ids)
      .where('url', 'like', `%${clear}%`)
      .execute();
  }
  await trx
    .updateTable('link_clicks')
    .set({ user_agent: null })
    .where('code', 'in', (eb) => eb.selectFrom('links').select('code').where('recipient_id', 'in', ids))
    .execute();
  if (channel === 'sms') {
    // A receipt waiting for its part names no account, only its connection, its id and the number:
    // it goes when it is one of these messages' own, as takeMatched (sms/receipts.ts) would give it
    // to one of their parts, answered (smpp_submits, read before its number is hashed below) or
    // recorded. One that names the number for another account's message (or for none yet) is
    // left for its own part, or the retention sweep: erasing one account's person never ends
    // another's message without its receipt.
    await trx
      .deleteFrom('sms_receipts')
      .where('recipient', 'in', identifiers)
      .where(
        sql<SqlBool>`exists (select 1 from smpp_submits s
                              where s.smsc = sms_receipts.smsc
                                and s.operator_message_id = sms_receipts.operator_message_id
                                and s.recipient = sms_receipts.recipient
                                and s.send_id in (${sql.join(sendIds)})
                                and sms_receipts.at >= s.at - ${RECEIPT_CLOCK_SKEW_MS})
                  or ${ownPartAmong(sql<SqlBool>`p.recipient_id in (${sql.join(ids)})`)}`,
      )
      .execute();
    await trx
      .updateTable('smpp_submits')
      .set({ recipient: hashOfHeld(args.erasureKey, sql.ref('recipient'), identifiers) })
      .where('send_id', 'in', sendIds)
      .where('recipient', 'in', identifiers)
      .execute();
    const sends = await trx.selectFrom('sends').select(['id', 'content']).where('id', 'in', sendIds).execute();
    for (const send of sends) {
      const content = JSON.parse(send.content) as { kind?: string; body?: string; tags?: unknown; sealed?: string };
      if (content.kind !== 'single') continue;
      // A sealed one's text goes with its seal, and it still reads `sealed`, its fields null.
      const { sealed, ...rest } = content;
      const erased = { ...rest, body: '', tags: {}, ...(sealed === undefined ? {} : { sealed: '' }) };
      await trx
        .updateTable('sends')
        .set({ content: JSON.stringify(erased) })
        .where('id', '=', send.id)
        .execute();
    }
  }
  const hashed = hashOfHeld(args.erasureKey, sql.ref('address'), identifiers);
  await trx
    .updateTable('send_recipients')
    // A relay's reply kept as the error (a bounce's) may quote the address.
    .set({ address: hashed, tags: null, error: sql<string>`replace(error, address, ${hashed})` })
    .where('id', 'in', ids)
    .execute();
  return { rows: rows.length, messages: rows.length };
}

/** One chunk of one step, in a transaction of its own. */
export const eraseChunk = procedure(
  import.meta.url,
  'eraseChunk',
  async ({ db, dialect }, args: ErasureArgs & Cursor & { step: string }): Promise<StepDone> =>
    db.transaction().execute(async (trx) => {
      const done = await STEPS[args.step](trx, dialect, args);
      const { contacts = 0, messages = 0 } = done;
      if (contacts > 0 || messages > 0) {
        await trx
          .updateTable('erasures')
          .set((eb) => ({ contacts: eb('contacts', '+', contacts), messages: eb('messages', '+', messages) }))
          .where('id', '=', args.erasureId)
          .execute();
      }
      return done;
    }),
);

/** The end of an erasure: its counts kept, its identifiers in clear gone. */
export const completeErasure = procedure(
  import.meta.url,
  'completeErasure',
  async ({ db }, args: { erasureId: string; now: number }): Promise<void> => {
    await db
      .updateTable('erasures')
      .set({ status: 'Completed', sealed_identifiers: null, completed_at: args.now })
      .where('id', '=', args.erasureId)
      .execute();
  },
);
