import type { Clock } from '../../clock.ts';
import type { ProcedureDatabase } from '../../db/procedure.ts';
import { seal, type Keyring } from '../../sealed.ts';
import { queries, type SandboxPart } from '../queries.ts';
import { sandboxTextPlace } from '../sealing.ts';
import { DEFAULT_SMSC, type OutgoingSms, type SmsTransport, type SubmitResult } from '../transport.ts';

/**
 * The embedded default (`SMS_TRANSPORT=sandbox:`): sends nothing anywhere, keeps every part it
 * takes in the database for `GET /sandbox/sms`, and accepts every message but those whose
 * number matches `?fail=<regular expression>`, which it refuses for good, as an operator
 * refuses an unknown subscriber. It reports each part delivered with its answer, through
 * the receipts path every transport uses (receipts.ts), so a message reads Submitted, then
 * Delivered. Its record is written before the page's results: like an
 * operator, it may hold a page twice after a crash between the two, never lose one. A
 * sensitive message's parts are kept sealed under `key`, each bound to its message and part.
 * `name`: the connection it is (sms/routing/), `default` unless added.
 */
export function sandboxTransport(
  database: ProcedureDatabase,
  clock: Clock,
  options: { key: Keyring; fail?: RegExp; name?: string },
): SmsTransport {
  const smsc = options.name ?? DEFAULT_SMSC;
  return {
    async submit(messages: OutgoingSms[]): Promise<SubmitResult[]> {
      const results: SubmitResult[] = [];
      const rows: SandboxPart[] = [];
      for (const m of messages) {
        if (options.fail?.test(m.recipient)) {
          results.push({
            accepted: false,
            permanent: true,
            error: 'the sandbox refuses this number (SMS_TRANSPORT fail pattern)',
            errorCode: 'sandbox',
          });
          continue;
        }
        const { parts, encoding } = m.segmented;
        parts.forEach((part, i) => {
          const text = m.sensitive
            ? seal(options.key.current, part.text, sandboxTextPlace(m.messageId, i + 1))
            : part.text;
          rows.push({
            accountId: m.accountId,
            sendId: m.sendId,
            messageId: m.messageId,
            recipient: m.recipient,
            sender: m.sender,
            part: i + 1,
            parts: parts.length,
            encoding,
            text,
            sealed: m.sensitive,
            opens: m.opensInSandbox === true,
          });
        });
        const operatorMessageIds = parts.map((_, i) => `${m.messageId}/${i + 1}`);
        results.push({
          accepted: true,
          operatorMessageIds,
          smsc: operatorMessageIds.map(() => smsc),
          receipts: operatorMessageIds.map((id) => ({
            smsc,
            operatorMessageId: id,
            state: 'DELIVRD',
            errorCode: null,
          })),
        });
      }
      if (rows.length > 0) await queries[database.dialect].insertSandboxParts(database.db, clock.now(), rows);
      return results;
    },
    async close() {},
  };
}
