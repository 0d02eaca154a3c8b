import { sql } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { ProcedureDatabase } from '../../db/procedure.ts';
import { enqueueReceipts } from '../receipts.ts';
import type { OutgoingSms, SmsTransport, SubmitResult } from '../transport.ts';

/**
 * The embedded default (`SMS_TRANSPORT=sandbox:`): sends nothing anywhere, keeps every part it
 * takes in the database for `GET /sandbox/sms`, and accepts every message but those whose
 * number matches `?fail=<regular expression>`, which it refuses for good, as an operator
 * refuses an unknown subscriber. Like an operator it then reports each part delivered,
 * through the receipts path every transport uses (receipts.ts), as a job queued with its
 * record: so the receipts may be applied before the page's results, as an operator's can. Its record is written before the page's results: like an
 * operator, it may hold a page twice after a crash between the two, never lose one.
 */
export function sandboxTransport(clock: Clock, options: { fail?: RegExp } = {}): SmsTransport {
  return {
    async submit(database: ProcedureDatabase, messages: OutgoingSms[]): Promise<SubmitResult[]> {
      const results: SubmitResult[] = [];
      const rows: unknown[][] = [];
      for (const m of messages) {
        if (options.fail?.test(m.recipient)) {
          results.push({ accepted: false, permanent: true, error: 'the sandbox refuses this number (SMS_TRANSPORT fail pattern)', errorCode: 'sandbox' });
          continue;
        }
        const { parts, encoding } = m.segmented;
        parts.forEach((part, i) => rows.push([m.accountId, m.sendId, m.messageId, m.recipient, m.sender, i + 1, parts.length, encoding, part.text]));
        results.push({ accepted: true, operatorMessageIds: parts.map((_, i) => `${m.messageId}/${i + 1}`) });
      }
      if (rows.length > 0) {
        await database.db.transaction().execute(async (trx) => {
          await insertRecords({ db: trx, dialect: database.dialect }, clock.now(), rows);
          const receipts = results.flatMap((r) => (r.accepted ? r.operatorMessageIds.map((id) => ({ operatorMessageId: id, state: 'DELIVRD', errorCode: null })) : []));
          await enqueueReceipts(trx, clock, receipts);
        });
      }
      return results;
    },
    async close() {},
  };
}

async function insertRecords({ db, dialect }: ProcedureDatabase, now: number, rows: unknown[][]): Promise<void> {
  const json = JSON.stringify(rows);
  await (dialect === 'postgres'
    ? sql`insert into sandbox_sms (account_id, send_id, message_id, recipient, sender, part, parts, encoding, text, created_at)
          select r ->> 0, r ->> 1, r ->> 2, r ->> 3, r ->> 4, (r ->> 5)::int, (r ->> 6)::int, r ->> 7, r ->> 8, ${now}::bigint
            from jsonb_array_elements(${json}::jsonb) r`
    : sql`insert into sandbox_sms (account_id, send_id, message_id, recipient, sender, part, parts, encoding, text, created_at)
          select value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6, value ->> 7, value ->> 8, ${now}
            from json_each(${json})`
  ).execute(db);
}
