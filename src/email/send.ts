import type { Keyring } from '../sealed.ts';
import type { Kysely } from 'kysely';
import { erasureKey } from '../messaging/erased-identifiers.ts';
import type { Registry } from 'prom-client';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import type { Schema } from '../db/schema.ts';
import { recipientMessageId } from '../messaging/message-ids.ts';
import { openedTags } from '../messaging/sealed-tags.ts';
import {
  expandedSend,
  propertyNames,
  rowProperties,
  sendInPages,
  type PageChannel,
  type PageRow,
} from '../messaging/pipeline.ts';
import type { Job, JobHandler, JobRun } from '../queue/worker.ts';
import { pauseForTest } from '../messaging/test-pause.ts';
import { EMAIL_SINGLE_KIND, type EmailSendContent, type EmailSendJob } from './accept.ts';
import {
  dropUnsent,
  finishResumedEmailSend,
  holdEmailRecipients,
  decideDueRetries,
  loadEmailPage,
  pageResults,
  recordEmailLinks,
  recordEmailPage,
  startEmailSend,
} from './record.ts';
import { registerEmailMetrics } from './metrics.ts';
import type { RenderPool } from './render-pool.ts';
import { compileEmail } from './compile.ts';
import type { CompiledEmail } from './render.ts';
import { accountOffsetMinutes } from '../accounts/time-zone.ts';
import { splitDue, type DueCheck } from '../messaging/holds.ts';
import type { RecipientZoneOf } from '../messaging/recipient-zone.ts';
import { signingKeyFor } from '../senders/dkim-keys.ts';
import { returnPath, trackingKey } from './tracking.ts';
import type { EmailResult, EmailTransport } from './transport.ts';

type Db = Kysely<Schema>;

/**
 * Recipients a render thread is given at once: few enough that their messages reach the
 * transport soon after one another, enough that a call's cost is spread over many.
 */
const RENDER_GROUP = 25;
/**
 * Groups rendering or rendered ahead of their hand-over, per render thread; as many again are
 * being handed over. With two, one thread sat idle a quarter of the time over SMTP, waiting
 * for its next group (661 messages/s for 20,000 emails; 710 with four).
 */
const GROUPS_PER_THREAD = 4;

/** Runs `work` for 0…count-1, at most `limit` at once, each started in turn; answers the results in that order. */
async function inFlight<R>(count: number, limit: number, work: (index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(count);
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const i = next++;
      results[i] = await work(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, lane));
  return results;
}

const groupCount = (rows: PageRow[]) => Math.ceil(rows.length / RENDER_GROUP);

/**
 * A group of recipients as the render pool gave them back: their Message-IDs (without
 * brackets and domain) and their signed MIME.
 */
interface RenderedGroup {
  messageIds: string[];
  raws: Buffer[];
}

/** A message handed over: its recipient, its Message-ID and what the transport answered. */
interface HandedEmail {
  row: PageRow;
  messageId: string;
  result: EmailResult;
}

/**
 * A send's recipients rendered a group at a time, in order, ahead of their hand-over: at most
 * `window` groups rendering or rendered and not yet taken. Pages are added as they are read,
 * the next one while this one is handed over (messaging/pipeline.ts's sendInPages), so the render
 * threads go on with it while this page's last messages are answered and its results
 * recorded, when they used to wait: over SMTP the first group of a page was rendered 108 ms
 * after its start, a seventh of a page's time, with the event loop and the relay idle.
 */
class RenderAhead {
  private readonly queue: Array<{ group: PageRow[]; rendered?: Promise<RenderedGroup> }> = [];
  /** The queue's first `started` groups are rendering or rendered. */
  private started = 0;
  private lastAdded: PageRow[] | undefined;

  private readonly window: number;
  private readonly render: (group: PageRow[]) => Promise<RenderedGroup>;

  constructor(window: number, render: (group: PageRow[]) => Promise<RenderedGroup>) {
    this.window = window;
    this.render = render;
  }

  /** A page's recipients, to render after those added before; a page added already (read ahead) is not added again. */
  add(rows: PageRow[]): void {
    if (rows === this.lastAdded) return;
    this.lastAdded = rows;
    for (let i = 0; i < rows.length; i += RENDER_GROUP) this.queue.push({ group: rows.slice(i, i + RENDER_GROUP) });
    this.fill();
  }

  /** The next group in order, with its rendering (begun now if it had not). */
  take(): { group: PageRow[]; rendered: Promise<RenderedGroup> } {
    const item = this.queue.shift();
    if (!item) throw new Error('no group left to take');
    if (item.rendered !== undefined) this.started--;
    const rendered = item.rendered ?? this.start(item.group);
    this.fill();
    return { group: item.group, rendered };
  }

  private fill(): void {
    for (; this.started < Math.min(this.window, this.queue.length); this.started++) {
      const item = this.queue[this.started];
      item.rendered = this.start(item.group);
    }
  }

  private start(group: PageRow[]): Promise<RenderedGroup> {
    const rendered = this.render(group);
    // A group rendered ahead is not taken when the job stops first.
    rendered.catch(() => undefined);
    return rendered;
  }
}

/** A Verify code's email past its expiry: a soft Bounce, never handed to the relay. */
const CODE_EXPIRED: EmailResult = { outcome: 'bounced', reply: 'not sent: its code expired before a relay took it' };

/**
 * The `email.send` job: start (expand) once, compile the batch's email once, then pages of
 * recipients in id order — each rendered on the render pool's threads (tags, tracking URLs, its
 * own Message-ID) and handed to the transport, the page's results recorded with the batch's
 * cursor — until none is left. Its `channel` is email's part of the pipeline
 * (messaging/pipeline.ts's PageChannel).
 */
export function emailSendHandler(deps: {
  database: Database;
  clock: Clock;
  transport: EmailTransport;
  renderPool: RenderPool;
  encryptionKey: Keyring;
  config: { publicUrl: string; defaultEmailDomain: string; bounceDomain: string; inboundSmtpPort: number | undefined };
  metrics: Registry;
  /** A recipient's zone, for deliverInRecipientTimeZone (messaging/recipient-zone.ts's recipientZone). */
  zoneOf: RecipientZoneOf;
}): JobHandler {
  const { database, clock, transport, config } = deps;
  const key = trackingKey(deps.encryptionKey);
  const metrics = registerEmailMetrics(deps.metrics, database);
  // List-Unsubscribe's mailto: only where the inbound listener takes the mail sent to it.
  const mailboxDomain = config.inboundSmtpPort === undefined ? undefined : config.bounceDomain;
  return {
    async handle(job: Job, run: JobRun) {
      const { sendId } = job.payload as EmailSendJob;
      const erasure = await erasureKey(database.db, deps.encryptionKey);
      // A Verify code (its own lane) goes whatever the address's consent to marketing, as at accept.
      const consent = job.kind !== EMAIL_SINGLE_KIND;
      const started = await expandedSend(deps, run, () =>
        database.call(startEmailSend, { sendId, now: clock.now(), erasureKey: erasure, consent }),
      );
      if (!started) return;
      const content = JSON.parse(started.content) as EmailSendContent;
      // A Verify code goes untracked and with no unsubscribe: a login mail is not a campaign, its
      // clicks are nobody's business, and an unsubscribe would refuse the next code.
      const passcode = content.passcode === true;
      const compiled: CompiledEmail = compileEmail(
        {
          subject: content.subject,
          preheader: content.preheader,
          html: content.html,
          from: content.from,
          replyTo: content.replyTo,
        },
        { tracking: !passcode, unsubscribe: !passcode },
      );
      // The same HTML finds the same links, so a send resumed after a crash writes what it wrote.
      if (!content.links)
        await database.call(recordEmailLinks, {
          sendId,
          content: JSON.stringify({ ...content, links: compiled.links }),
        });
      const names = await propertyNames(database.db, started.accountId);
      const domain = content.from.email.slice(content.from.email.lastIndexOf('@') + 1).toLowerCase();
      // Signed with the From domain's key: the service's, or the account's own sender domain's.
      const dkimKey = await signingKeyFor(database, deps.encryptionKey, clock, {
        accountId: domain === config.defaultEmailDomain ? null : started.accountId,
        domain,
      });
      // deliverInRecipientTimeZone: a recipient is held until its clock reads the time. An address
      // has no country: its zone is its contact's timeZone, else the account's offset.
      const due: DueCheck | null = content.localDelivery
        ? {
            window: null,
            localDelivery: content.localDelivery,
            zoneOf: deps.zoneOf,
            names,
            accountOffsetMinutes: await accountOffsetMinutes(database.db, started.accountId),
          }
        : null;
      const read = async (cursor: number) => {
        const now = clock.now();
        const page = await loadEmailPage(database.db, started.accountId, sendId, cursor, now);
        // A retry (tried before) due since the run started is decided again before it goes.
        if (!page.some((row) => row.attempts > 0)) return page;
        await database.call(decideDueRetries, { sendId, now, erasureKey: erasure, consent });
        return loadEmailPage(database.db, started.accountId, sendId, cursor, now);
      };
      // A page's recipients that go now. Those held are written first, in a transaction of their
      // own, so the next read passes over them; a page held whole gives way to the next one. A
      // retry is never held: its time had come when it was first tried, wherever its reader is now.
      const going = async (page: PageRow[], cursor: number): Promise<PageRow[]> => {
        for (let rows = page; ; rows = await read(cursor)) {
          if (!due || rows.length === 0) return rows;
          const { go, held } = splitDue(
            rows.filter((row) => row.attempts === 0),
            due,
            clock.now(),
          );
          if (held.length > 0) await database.call(holdEmailRecipients, { held, now: clock.now() });
          const goes = new Set(go);
          const now = rows.filter((row) => row.attempts > 0 || goes.has(row));
          if (now.length > 0) return now;
        }
      };
      const load = async (cursor: number) => going(await read(cursor), cursor);
      const send = { ...started, sendId, firstPage: await going(started.firstPage, started.cursor) };
      const openedOwn = (row: PageRow) =>
        passcode ? openedTags(row.tags!, sendId, row.address, deps.encryptionKey) : row.tags!;
      const renderer = deps.renderPool.open({
        compiled,
        sendId,
        trackingKey: key.current,
        publicUrl: config.publicUrl,
        mailboxDomain,
        dkimKey,
      });
      const window = deps.renderPool.size * GROUPS_PER_THREAD;
      const ahead = new RenderAhead(window, async (group) => {
        // A message first tried before ids were derived keeps the id it went out with.
        const messageIds = group.map((row) => row.message_id ?? recipientMessageId(sendId, Number(row.id)));
        const raws = await renderer.render(
          group.map((row, i) => ({
            recipientId: Number(row.id),
            to: row.address,
            sources: {
              own: row.tags ? (JSON.parse(openedOwn(row)) as Record<string, string>) : null,
              properties: rowProperties(row, names),
            },
            messageId: `<${messageIds[i]}@${domain}>`,
          })),
          new Date(clock.now()),
        );
        return { messageIds, raws };
      });
      const channel: PageChannel<PageRow[], HandedEmail[]> = {
        load,
        finish: (lease) => database.call(finishResumedEmailSend, { sendId, now: clock.now(), lease }),
        // Rendered ahead: the page's groups join those queued for the render threads (the next
        // page's too, once read), and the hand-over takes each group as it is rendered.
        render: async (rows, next) => {
          ahead.add(rows);
          next?.then(
            (nextRows) => ahead.add(nextRows),
            () => undefined,
          );
          return rows;
        },
        handOver: async (rows, signal) => {
          const handed = await inFlight(groupCount(rows), window, async () => {
            const { group, rendered } = ahead.take();
            const { messageIds, raws } = await rendered;
            // A Verify code is not handed over once it has expired (a worker down meanwhile).
            const expired = content.validUntil !== undefined && clock.now() >= content.validUntil;
            return Promise.all(
              group.map(async (row, i) => {
                const messageId = messageIds[i];
                if (expired) return { row, messageId, result: CODE_EXPIRED };
                // The envelope sender is the recipient's VERP address: a bounce that comes back
                // later names its message.
                const from = returnPath(key, config.bounceDomain, { recipientId: Number(row.id), sendId });
                const result = await transport.send(
                  { accountId: send.accountId, sendId, messageId, from, to: row.address, raw: raws[i], passcode },
                  signal,
                );
                return { row, messageId, result };
              }),
            );
          });
          await pauseForTest('email.handed');
          return handed.flat();
        },
        record: async (handed, { cursor, lease, last }) => {
          const now = clock.now();
          const results = pageResults(sendId, now, handed, content.validUntil);
          const recorded = await database.call(recordEmailPage, {
            sendId,
            accountId: send.accountId,
            webhookUrl: send.webhookUrl,
            now,
            cursor,
            ...results,
            lease,
            last,
          });
          // Every hard bounce is a suppression; the other Bounces are soft.
          const bounced = results.outcomes.filter((outcome) => outcome.status === 'Bounce').length;
          metrics.bounces.inc({ kind: 'hard', timing: 'synchronous' }, results.suppress.length);
          metrics.bounces.inc({ kind: 'soft', timing: 'synchronous' }, bounced - results.suppress.length);
          return recorded;
        },
      };
      try {
        return await sendInPages(deps, run, send, channel);
      } finally {
        renderer.close();
      }
    },
    onDead: (trx: Db, job: Job, error: string) =>
      dropUnsent(trx, database.dialect, clock, (job.payload as EmailSendJob).sendId, error),
  };
}
