import { sql } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { ProcedureDatabase } from '../../db/procedure.ts';
import { seal, type Keyring } from '../../sealed.ts';
import type { OutgoingSms, SmsTransport, SubmitResult } from '../transport.ts';

/**
 * The embedded default (`SMS_TRANSPORT=sandbox:`): sends nothing anywhere, keeps every part it
 * takes in the database for `GET /sandbox/sms`, and accepts every message but those whose
 * number matches `?fail=<regular expression>`, which it refuses for good, as an operator
 * refuses an unknown subscriber. It reports each part delivered with its answer, through
 * the receipts path every transport uses (receipts.ts), so a message reads Submitted, then
 * Delivered. Its record is written before the page's results: like an
 * operator, it may hold a page twice after a crash between the two, never lose one. A
 * sensitive message's parts are kept sealed under `key`, each bound to its message and part.
 */
export function sandboxTransport(database: ProcedureDatabase, clock: Clock, options: { key: Keyring; fail?: RegExp }): SmsTransport {
  return {
    async submit(messages: OutgoingSms[]): Promise<SubmitResult[]> {
      const results: SubmitResult[] = [];
      const rows: unknown[][] = [];
      for (const m of messages) {
        if (options.fail?.test(m.recipient)) {
          results.push({ accepted: false, permanent: true, error: 'the sandbox refuses this number (SMS_TRANSPORT fail pattern)', errorCode: 'sandbox' });
          continue;
        }
        const { parts, encoding } = m.segmented;
        parts.forEach((part, i) => {
          const text = m.sensitive ? seal(options.key.current, part.text, sandboxTextPlace(m.messageId, i + 1)) : part.text;
          rows.push([m.accountId, m.sendId, m.messageId, m.recipient, m.sender, i + 1, parts.length, encoding, text, m.sensitive]);
        });
        const operatorMessageIds = parts.map((_, i) => `${m.messageId}/${i + 1}`);
        results.push({ accepted: true, operatorMessageIds, receipts: operatorMessageIds.map((id) => ({ operatorMessageId: id, state: 'DELIVRD', errorCode: null })) });
      }
      if (rows.length > 0) await insertRecords(database, clock.now(), rows);
      return results;
    },
    async close() {},
  };
}

/** What a sealed record's text is bound to: its message and part. */
export const sandboxTextPlace = (messageId: string, part: number) => `sandbox_sms.text:${messageId}/${part}`;

async function insertRecords({ db, dialect }: ProcedureDatabase, now: number, rows: unknown[][]): Promise<void> {
  const json = JSON.stringify(rows);
  await (dialect === 'postgres'
    ? sql`insert into sandbox_sms (account_id, send_id, message_id, recipient, sender, part, parts, encoding, text, sealed, created_at)
          select r ->> 0, r ->> 1, r ->> 2, r ->> 3, r ->> 4, (r ->> 5)::int, (r ->> 6)::int, r ->> 7, r ->> 8, (r ->> 9)::boolean, ${now}::bigint
            from jsonb_array_elements(${json}::jsonb) r`
    : sql`insert into sandbox_sms (account_id, send_id, message_id, recipient, sender, part, parts, encoding, text, sealed, created_at)
          select value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6, value ->> 7, value ->> 8, value ->> 9, ${now}
            from json_each(${json})`
  ).execute(db);
}
