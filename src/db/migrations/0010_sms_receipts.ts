import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Receipts name a part by the operator's id, whatever order they come in.
  await db.schema.createIndex('sms_parts_operator').on('sms_parts').column('operator_message_id').execute();
  // A receipt that came before its part was recorded (src/sms/receipts.ts) waits here, and
  // is matched and deleted when the part is written.
  await db.schema
    .createTable('sms_receipts')
    .addColumn('operator_message_id', 'text', (c) => c.primaryKey())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('error_code', 'text')
    .addColumn('at', 'bigint', (c) => c.notNull())
    .execute();
}
