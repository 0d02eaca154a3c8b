import { randomUUID } from 'node:crypto';
import { setImmediate } from 'node:timers/promises';
import type { Keyring } from '../sealed.ts';
import type { Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import type { Schema } from '../db/schema.ts';
import { expandedSend, propertyNames, rowProperties, sendInPages } from '../messaging/send.ts';
import type { Job, JobHandler, JobRun } from '../queue/worker.ts';
import { pauseForTest } from '../test-pause.ts';
import type { EmailSendContent, EmailSendJob } from './accept.ts';
import { dropUnsent, pageResults, PENDING, recordEmailLinks, recordEmailPage, startEmailSend } from './record.ts';
import { compileEmail, renderEmail, type CompiledEmail } from './render.ts';
import { recipientUrls, trackingKey } from './tracking.ts';
import type { EmailTransport } from './transport.ts';

type Db = Kysely<Schema>;

/** Messages of a page rendered and handed over at once: a transport bounds its own connections. */
const IN_FLIGHT = 32;

/** Runs `work` on every item, at most `limit` at once; answers the results in item order. */
async function inFlight<T, R>(items: T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}

/**
 * The `email.send` job: start (expand) once, compile the batch's email once, then pages of
 * recipients in id order — each rendered (tags, tracking URLs, its own Message-ID) and handed
 * to the transport, the page's results recorded with the batch's cursor — until none is left.
 */
export function emailSendHandler(deps: { database: Database; clock: Clock; transport: EmailTransport; encryptionKey: Keyring; config: { publicUrl: string; bounceDomain: string; inboundSmtpPort: number | undefined } }): JobHandler {
  const { database, clock, transport, config } = deps;
  const key = trackingKey(deps.encryptionKey);
  // List-Unsubscribe's mailto: only where the inbound listener takes the mail sent to it.
  const mailboxDomain = config.inboundSmtpPort === undefined ? undefined : config.bounceDomain;
  return {
    async handle(job: Job, run: JobRun) {
      const { sendId } = job.payload as EmailSendJob;
      const started = await expandedSend(clock, run, () => database.call(startEmailSend, { sendId, now: clock.now() }));
      if (!started) return;
      const content = JSON.parse(started.content) as EmailSendContent;
      const compiled: CompiledEmail = compileEmail({ subject: content.subject, preheader: content.preheader, html: content.html, from: content.from, replyTo: content.replyTo }, { tracking: true });
      // The same HTML finds the same links, so a send resumed after a crash writes what it wrote.
      if (!content.links) await database.call(recordEmailLinks, { sendId, content: JSON.stringify({ ...content, links: compiled.links }) });
      const names = await propertyNames(database.db, started.accountId);
      const domain = content.from.email.slice(content.from.email.lastIndexOf('@') + 1).toLowerCase();
      const send = { ...started, sendId };
      return sendInPages(deps, run, send, PENDING, async (rows, { cursor, last }) => {
        const date = new Date(clock.now());
        const handed = await inFlight(rows, IN_FLIGHT, async (row) => {
          // Rendering is synchronous: a turn of the event loop between two messages lets the
          // transport's writes of the ones before go out while the next are rendered.
          await setImmediate();
          const messageId = randomUUID();
          const raw = await renderEmail(compiled, {
            to: row.address,
            sources: { own: row.tags ? (JSON.parse(row.tags) as Record<string, string>) : null, properties: rowProperties(row, names) },
            messageId: `<${messageId}@${domain}>`,
            urls: recipientUrls(key, config.publicUrl, Number(row.id), mailboxDomain),
            date,
          });
          const result = await transport.send({ accountId: send.accountId, sendId, messageId, from: content.from.email, to: row.address, raw }, run.signal);
          return { row, messageId, result };
        });
        await pauseForTest('email.handed');
        const now = clock.now();
        return database.call(recordEmailPage, { sendId, accountId: send.accountId, webhookUrl: send.webhookUrl, now, cursor, ...pageResults(sendId, now, handed), last });
      });
    },
    onDead: (trx: Db, job: Job, error: string) => dropUnsent(trx, clock, (job.payload as EmailSendJob).sendId, error),
  };
}

