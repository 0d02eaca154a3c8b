import { sql } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { ProcedureDatabase } from '../../db/procedure.ts';
import type { EmailResult, EmailTransport, OutgoingEmail } from '../transport.ts';

/**
 * The embedded default (`EMAIL_TRANSPORT=sandbox:`): sends nothing anywhere, keeps every
 * message it takes (raw MIME) for `GET /sandbox/email`, and accepts it, so the pipeline
 * records Processed then Delivered. For trying failures in development, `?defer=<regular
 * expression>` refuses the addresses it matches for now (451 4.3.0, Deferred, tried again)
 * and `&bounce=<regular expression>` for good (550 5.1.1, a hard Bounce, which suppresses the
 * address); refused messages are not kept. Its record is written before the page's results:
 * like a mail server, it may hold a page twice after a crash between the two, never lose one.
 * The messages handed over at one moment are kept in one statement, at most KEPT_AT_ONCE.
 */
/**
 * A group this full is written at once, not at the end of the turn: the send job renders the
 * page's next messages while the database keeps these (all at the turn's end, rendering and
 * writing took turns, and a third of a PostgreSQL batch's time went by with the renderer idle).
 */
const KEPT_AT_ONCE = 16;

export function sandboxEmailTransport(database: ProcedureDatabase, clock: Clock, options: { defer?: RegExp; bounce?: RegExp }): EmailTransport {
  let waiting: Array<{ row: unknown[]; settle: (error?: unknown) => void }> = [];
  const flush = async () => {
    if (waiting.length === 0) return;
    const batch = waiting;
    waiting = [];
    try {
      await insertRecords(database, clock.now(), batch.map((w) => w.row));
      for (const w of batch) w.settle();
    } catch (error) {
      for (const w of batch) w.settle(error);
    }
  };
  const keep = (m: OutgoingEmail) =>
    new Promise<void>((resolve, reject) => {
      waiting.push({ row: [m.accountId, m.sendId, m.messageId, m.to, m.raw.toString('utf8')], settle: (error) => (error === undefined ? resolve() : reject(error)) });
      if (waiting.length === KEPT_AT_ONCE) void flush();
      else if (waiting.length === 1) setImmediate(flush);
    });
  return {
    async send(message: OutgoingEmail): Promise<EmailResult> {
      if (options.bounce?.test(message.to)) return { outcome: 'bounced', reply: `550 5.1.1 <${message.to}>: the sandbox bounces this address (EMAIL_TRANSPORT bounce=)` };
      if (options.defer?.test(message.to)) return { outcome: 'deferred', reply: `451 4.3.0 <${message.to}>: the sandbox defers this address (EMAIL_TRANSPORT defer=)` };
      await keep(message);
      return { outcome: 'accepted', reply: `250 2.0.0 Ok: kept by the sandbox as ${message.messageId}` };
    },
    async close() {},
  };
}

async function insertRecords({ db, dialect }: ProcedureDatabase, now: number, rows: unknown[][]): Promise<void> {
  const json = JSON.stringify(rows);
  await (dialect === 'postgres'
    ? sql`insert into sandbox_email (account_id, send_id, message_id, recipient, raw, created_at)
          select r ->> 0, r ->> 1, r ->> 2, r ->> 3, r ->> 4, ${now}::bigint from jsonb_array_elements(${json}::jsonb) r`
    : sql`insert into sandbox_email (account_id, send_id, message_id, recipient, raw, created_at)
          select value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, ${now} from json_each(${json})`
  ).execute(db);
}
