import type { Clock } from '../../clock.ts';
import type { ProcedureDatabase } from '../../db/procedure.ts';
import { queries, type SandboxEmail } from '../queries.ts';
import type { EmailResult, EmailTransport, OutgoingEmail } from '../transport.ts';
import { seal, type Keyring } from '../../sealed.ts';
import { sandboxRawPlace } from '../accept.ts';

/**
 * The embedded default (`EMAIL_TRANSPORT=sandbox:`): sends nothing anywhere, keeps every
 * message it takes (raw MIME) for `GET /sandbox/email`, and accepts it, so the pipeline
 * records Processed then Delivered. For trying failures in development, `?defer=<regular
 * expression>` refuses the addresses it matches for now (451 4.3.0, Deferred, tried again)
 * and `&bounce=<regular expression>` for good (550 5.1.1, a hard Bounce, which suppresses the
 * address); refused messages are not kept. Its record is written before the page's results:
 * like a mail server, it may hold a page twice after a crash between the two, never lose one.
 * The messages handed over at one moment are kept in one statement, at most KEPT_AT_ONCE. A
 * Verify code's message is kept sealed under `key`, bound to its message.
 */
/**
 * A group this full is written at once, not at the end of the turn: the send job renders the
 * page's next messages while the database keeps these (all at the turn's end, rendering and
 * writing took turns, and a third of a PostgreSQL batch's time went by with the renderer idle).
 */
const KEPT_AT_ONCE = 16;

export function sandboxEmailTransport(
  database: ProcedureDatabase,
  clock: Clock,
  options: { defer?: RegExp; bounce?: RegExp; key: Keyring },
): EmailTransport {
  let waiting: Array<{ row: SandboxEmail; settle: (error?: unknown) => void }> = [];
  const flush = async () => {
    if (waiting.length === 0) return;
    const batch = waiting;
    waiting = [];
    try {
      await queries[database.dialect].insertSandboxEmail(
        database.db,
        clock.now(),
        batch.map((w) => w.row),
      );
      for (const w of batch) w.settle();
    } catch (error) {
      for (const w of batch) w.settle(error);
    }
  };
  const keep = (m: OutgoingEmail) =>
    new Promise<void>((resolve, reject) => {
      const clear = m.raw.toString('utf8');
      const opens = m.passcode === true;
      const raw = opens ? seal(options.key.current, clear, sandboxRawPlace(m.messageId)) : clear;
      const row = { accountId: m.accountId, sendId: m.sendId, messageId: m.messageId, recipient: m.to, raw, opens };
      waiting.push({ row, settle: (error) => (error === undefined ? resolve() : reject(error)) });
      if (waiting.length === KEPT_AT_ONCE) void flush();
      else if (waiting.length === 1) setImmediate(flush);
    });
  return {
    async send(message: OutgoingEmail): Promise<EmailResult> {
      if (options.bounce?.test(message.to))
        return {
          outcome: 'bounced',
          reply: `550 5.1.1 <${message.to}>: the sandbox bounces this address (EMAIL_TRANSPORT bounce=)`,
        };
      if (options.defer?.test(message.to))
        return {
          outcome: 'deferred',
          reply: `451 4.3.0 <${message.to}>: the sandbox defers this address (EMAIL_TRANSPORT defer=)`,
        };
      await keep(message);
      return { outcome: 'accepted', reply: `250 2.0.0 Ok: kept by the sandbox as ${message.messageId}` };
    },
    async close() {},
  };
}
