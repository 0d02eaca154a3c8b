import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Each part an SMSC answered, written (a few ms of answers a transaction) before its window
  // slot frees, and kept until its message's outcome is recorded: a page sent again after a
  // crash or a refusal for now sends only the parts no answer was recorded for
  // (sms/transports/smpp/journal.ts). The send and recipient name the message across its
  // renderings, which each get a new message id.
  await db.schema
    .createTable('smpp_submits')
    .addColumn('send_id', 'text', (c) => c.notNull())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('part', 'integer', (c) => c.notNull())
    .addColumn('parts', 'integer', (c) => c.notNull())
    .addColumn('operator_message_id', 'text', (c) => c.notNull())
    .addColumn('at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('smpp_submits_pkey', ['send_id', 'recipient', 'part'])
    .execute();
  // A receipt that comes before its part's outcome is recorded finds it here by the operator's id.
  await db.schema.createIndex('smpp_submits_operator').on('smpp_submits').column('operator_message_id').execute();
}
