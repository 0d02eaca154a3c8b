import { randomUUID } from 'node:crypto';
import type { Keyring } from '../sealed.ts';
import type { Kysely } from 'kysely';
import type { Registry } from 'prom-client';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import type { Schema } from '../db/schema.ts';
import { expandedSend, propertyNames, rowProperties, sendInPages } from '../messaging/send.ts';
import type { Lease } from '../queue/queries.ts';
import type { Job, JobHandler, JobRun } from '../queue/worker.ts';
import { pauseForTest } from '../test-pause.ts';
import type { EmailSendContent, EmailSendJob } from './accept.ts';
import { dropUnsent, finishResumedEmailSend, loadEmailPage, pageResults, recordEmailLinks, recordEmailPage, startEmailSend } from './record.ts';
import { registerEmailMetrics } from './metrics.ts';
import type { RenderPool } from './render-pool.ts';
import { compileEmail } from './compile.ts';
import type { CompiledEmail } from './render.ts';
import { signingKeyFor } from './dkim-keys.ts';
import { returnPath, trackingKey } from './tracking.ts';
import type { EmailTransport } from './transport.ts';

type Db = Kysely<Schema>;

/**
 * Recipients a render thread is given at once: few enough that their messages reach the
 * transport soon after one another, enough that a call's cost is spread over many.
 */
const RENDER_GROUP = 25;
/**
 * Groups in flight per render thread: the thread renders while the groups before go to the
 * transport. With two, one thread sat idle a quarter of the time over SMTP, waiting for its
 * next group (661 messages/s for 20,000 emails; 710 with four).
 */
const GROUPS_PER_THREAD = 4;

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

const groups = <T>(items: T[], size: number) => Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));

/**
 * The `email.send` job: start (expand) once, compile the batch's email once, then pages of
 * recipients in id order — each rendered on the render pool's threads (tags, tracking URLs, its
 * own Message-ID) and handed to the transport, the page's results recorded with the batch's
 * cursor — until none is left.
 */
export function emailSendHandler(deps: {
  database: Database;
  clock: Clock;
  transport: EmailTransport;
  renderPool: RenderPool;
  encryptionKey: Keyring;
  config: { publicUrl: string; defaultEmailDomain: string; bounceDomain: string; inboundSmtpPort: number | undefined };
  metrics: Registry;
}): JobHandler {
  const { database, clock, transport, config } = deps;
  const key = trackingKey(deps.encryptionKey);
  const metrics = registerEmailMetrics(deps.metrics, database);
  // List-Unsubscribe's mailto: only where the inbound listener takes the mail sent to it.
  const mailboxDomain = config.inboundSmtpPort === undefined ? undefined : config.bounceDomain;
  return {
    async handle(job: Job, run: JobRun) {
      const { sendId } = job.payload as EmailSendJob;
      const started = await expandedSend(deps, run, () => database.call(startEmailSend, { sendId, now: clock.now() }));
      if (!started) return;
      const content = JSON.parse(started.content) as EmailSendContent;
      const compiled: CompiledEmail = compileEmail({ subject: content.subject, preheader: content.preheader, html: content.html, from: content.from, replyTo: content.replyTo }, { tracking: true });
      // The same HTML finds the same links, so a send resumed after a crash writes what it wrote.
      if (!content.links) await database.call(recordEmailLinks, { sendId, content: JSON.stringify({ ...content, links: compiled.links }) });
      const names = await propertyNames(database.db, started.accountId);
      const domain = content.from.email.slice(content.from.email.lastIndexOf('@') + 1).toLowerCase();
      // Signed with the From domain's key: the service's, or the account's own sender domain's.
      const dkimKey = await signingKeyFor(database, deps.encryptionKey, clock, { accountId: domain === config.defaultEmailDomain ? null : started.accountId, domain });
      const send = { ...started, sendId };
      const pending = {
        load: (cursor: number) => loadEmailPage(database.db, send.accountId, sendId, cursor, clock.now()),
        finish: (lease: Lease) => database.call(finishResumedEmailSend, { sendId, now: clock.now(), lease }),
      };
      const renderer = deps.renderPool.open({ compiled, trackingKey: key.current, publicUrl: config.publicUrl, mailboxDomain, dkimKey });
      try {
        return await sendInPages(deps, run, send, pending, async (rows, { cursor, last }) => {
          const date = new Date(clock.now());
          const handed = await inFlight(groups(rows, RENDER_GROUP), deps.renderPool.size * GROUPS_PER_THREAD, async (group) => {
            const messageIds = group.map(() => randomUUID());
            const raws = await renderer.render(
              group.map((row, i) => ({
                recipientId: Number(row.id),
                to: row.address,
                sources: { own: row.tags ? (JSON.parse(row.tags) as Record<string, string>) : null, properties: rowProperties(row, names) },
                messageId: `<${messageIds[i]}@${domain}>`,
              })),
              date,
            );
            return Promise.all(
              group.map(async (row, i) => {
                const messageId = messageIds[i];
                // The envelope sender is the recipient's VERP address: a bounce that comes back later names its message.
                const from = returnPath(key, config.bounceDomain, Number(row.id));
                const result = await transport.send({ accountId: send.accountId, sendId, messageId, from, to: row.address, raw: raws[i] }, run.signal);
                return { row, messageId, result };
              }),
            );
          });
          await pauseForTest('email.handed');
          const now = clock.now();
          const results = pageResults(sendId, now, handed.flat());
          const recorded = await database.call(recordEmailPage, { sendId, accountId: send.accountId, webhookUrl: send.webhookUrl, now, cursor, ...results, last });
          // Every hard bounce is a suppression; the other Bounces are soft.
          const bounced = results.outcomes.filter((outcome) => outcome[1] === 'Bounce').length;
          metrics.bounces.inc({ kind: 'hard', timing: 'synchronous' }, results.suppress.length);
          metrics.bounces.inc({ kind: 'soft', timing: 'synchronous' }, bounced - results.suppress.length);
          return recorded;
        });
      } finally {
        renderer.close();
      }
    },
    onDead: (trx: Db, job: Job, error: string) => dropUnsent(trx, database.dialect, clock, (job.payload as EmailSendJob).sendId, error),
  };
}

