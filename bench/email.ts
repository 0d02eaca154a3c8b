/**
 * An email batch as `herald serve` runs it (one process: API and workers), through the sandbox
 * transport or, with BENCH_TRANSPORT=smtp, over SMTP to `herald sim smtp` in a process of its own.
 *
 *   npm run bench:email                                                  # SQLite
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/herald_bench_email npm run bench:email
 *   BENCH_TRANSPORT=smtp BENCH_LISTS=99000 npm run bench:email           # over SMTP, with plain nodemailer beside it
 *   BENCH_LISTS=99000 npm run bench:email                                # the large batch alone
 *   BENCH_PORT=18720 npm run bench:email                                 # beside another run (default 18700)
 *   BENCH_CPU_PROF=/tmp/prof npm run bench:email                         # the server's CPU profiles there
 *   BENCH_ENDPOINT=1 npm run bench:email                                 # with a webhook endpoint too
 *
 * For each list size of BENCH_LISTS (19000,99000: batches of 20,000 and 100,000), on a fresh
 * database (on PostgreSQL the one named in DATABASE_URL, created, dropped first, and dropped at
 * the end) and a fresh server: one `POST /email/batch` of 1,000 `recipients` (each with its own
 * tags) plus a list of that many contacts (emailOptIn true, with the tags' properties), written
 * straight into the database. One fixed message: bench/fixtures/email-newsletter.html (about
 * 16 KB, 50 links, 3 tags) as the Base64 `emailBody`, a subject and a preheader with tags,
 * tracking on (the renderer always tracks), a `webHookUrl` on a local receiver; the account's
 * rate limit is raised for the run. It prints, per size:
 *  - messages/s from the request to the last message handed to the transport. The hand-over's
 *    time is the sandbox's own record of it, `sandbox_email.created_at`: the transport stamps
 *    the messages it takes together as it writes them, before it answers the send job, so the
 *    latest stamp of the batch is its last hand-over (the job then records that page's results;
 *    the bench waits for the batch to be Completed before reading);
 *  - the time from that last hand-over to the last Delivered event received by the webhook;
 *  - the server's peak RSS (VmHWM), one server per size, so "flat in list size" is read across
 *    the rows. Herald runs as it is deployed on each database: on SQLite one `herald serve`
 *    (API and worker in one process); on PostgreSQL BENCH_ROLES (default `api,worker`: an API
 *    process and a worker process, which renders, signs and sends; `all` for a single one),
 *    and the peak RSS printed is the largest of them.
 *
 * Over SMTP (`EMAIL_TRANSPORT=smtp://…?pool=5`, DKIM on: every message is signed with the
 * service domain's key), messages/s runs from the request to the batch's Completed, the moment
 * its last answer was recorded: every answer recorded durably, not only handed over. Then, with
 * the server stopped, plain nodemailer in this process: a pool of as many connections to the
 * same sink, sending as many messages — the same email rendered for the first 1,000 recipients
 * in turn (rendered before the clock starts), signed by nodemailer with the same key — from the
 * first send to the last answer; and the ratio of the two rates.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent } from 'node:http';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { createSecretKey } from 'node:crypto';
import { createInterface } from 'node:readline';
import { createTransport } from 'nodemailer';
import { createAccount, updateAccountSettings } from '../src/accounts/service.ts';
import { systemClock } from '../src/clock.ts';
import { signingKeyFor } from '../src/senders/dkim-keys.ts';
import { compileEmail } from '../src/email/compile.ts';
import { renderEmail } from '../src/email/render.ts';
import { recipientUrls, trackingKey } from '../src/email/tracking.ts';
import { Keyring } from '../src/sealed.ts';
import { migrateToLatest, openDatabase, type Database } from '../src/db/database.ts';
import { seedList } from './seed.ts';
import { PROCEDURE_MODULES } from '../src/server/procedures.ts';
import {
  authorizedHeaders,
  BENCH_ENCRYPTION_KEY,
  peakRssMiB,
  post,
  startHeraldRoles,
  startWebhookCounter,
  waitForHealth,
  withFreshPostgres,
} from './herald-process.ts';

const LISTS = (process.env.BENCH_LISTS ?? '19000,99000').split(',').map(Number);
const RECIPIENTS = 1000;
const PORT = Number(process.env.BENCH_PORT ?? 18_700);
const SMTP = process.env.BENCH_TRANSPORT === 'smtp';
/** The account also has a webhook endpoint on `email.events`, on a receiver of its own. */
const ENDPOINT = process.env.BENCH_ENDPOINT === '1';
/** Herald's connections to the sink, and plain nodemailer's. */
const SMTP_POOL = 5;
const requestedUrl = process.env.DATABASE_URL || undefined;
const postgres = requestedUrl?.startsWith('postgres') ?? false;
const html = readFileSync(new URL('fixtures/email-newsletter.html', import.meta.url), 'utf8');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const address = (n: number) => `customer${n}@example.com`;
const city = (n: number) => (n % 3 === 0 ? 'Zürich' : n % 3 === 1 ? 'Pune' : 'Lyon');
const plan = (n: number) => (n % 2 ? 'Gold' : 'Silver');

/** A list of `count` customers with three properties each, written straight into the database: its id. */
async function seedCustomers(database: Database, accountId: string, count: number): Promise<string> {
  const property = { firstName: crypto.randomUUID(), city: crypto.randomUUID(), plan: crypto.randomUUID() };
  await database.db
    .insertInto('contact_properties')
    .values(
      Object.entries(property).map(([name, id]) => ({
        id,
        account_id: accountId,
        name,
        name_key: name.toLowerCase(),
        created_at: Date.now(),
      })),
    )
    .execute();
  return seedList(database, accountId, count, (n) => ({
    email: address(RECIPIENTS + n),
    mobile: null,
    mobile_country_code: null,
    mobile_opt_in: false,
    email_opt_in: true,
    properties: JSON.stringify({
      [property.firstName]: `Customer ${n}`,
      [property.city]: city(n),
      [property.plan]: plan(n),
    }),
  }));
}

async function untilCompleted(database: Database, batchId: string): Promise<void> {
  for (;;) {
    const row = await database.db
      .selectFrom('sends')
      .select('status')
      .where('id', '=', batchId)
      .executeTakeFirstOrThrow();
    if (row.status === 'Completed') return;
    await sleep(100);
  }
}

/** `herald sim smtp` in its own process, accepting every message and keeping none (counting only). */
async function startSink(): Promise<{ port: number; accepted(): Promise<number>; stop(): Promise<void> }> {
  const child = spawn('bin/herald', ['sim', 'smtp', '--port', '0', '--http-port', '0', '--retain', '0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let banner: RegExpExecArray | null = null;
  for await (const line of createInterface({ input: child.stdout! })) {
    banner = /SMTP(?: with STARTTLS)? on [^:]+:(\d+), control on (http:\S+)/.exec(line);
    if (banner) break;
  }
  if (!banner) throw new Error('herald sim smtp stopped before it listened');
  const [, port, control] = banner;
  return {
    port: Number(port),
    async accepted() {
      return ((await (await fetch(`${control}/stats`)).json()) as { messages: { accepted: number } }).messages.accepted;
    },
    async stop() {
      child.kill('SIGTERM');
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

const sendingDetails = {
  senderFrom: { email: 'news@mail.localhost', displayName: 'Example Shop' },
  replyTo: { email: 'help@mail.localhost', displayName: 'Help' },
  subject: 'Spring news for [firstName]',
  preHeaderText: 'Early access for [plan] members in [city]',
};
const ownTags = (i: number) => [
  { tagName: '[firstName]', tagValue: `Guest ${i + 1}` },
  { tagName: '[city]', tagValue: city(i) },
  { tagName: '[plan]', tagValue: plan(i) },
];

/**
 * Plain pooled nodemailer to the sink: `total` messages, the batch's email rendered for its first
 * RECIPIENTS recipients before the clock starts and sent in turn, each signed by nodemailer
 * with the service domain's DKIM key (the one Herald signed with). Answers messages/s, from the
 * first send to the last answer.
 */
async function plainNodemailer(database: Database, sinkPort: number, total: number): Promise<number> {
  const keyring = new Keyring(createSecretKey(Buffer.from(BENCH_ENCRYPTION_KEY, 'hex')));
  const key = await signingKeyFor(database, keyring, systemClock, { accountId: null, domain: 'mail.localhost' });
  const { senderFrom, replyTo, subject, preHeaderText } = sendingDetails;
  const compiled = compileEmail(
    { subject, preheader: preHeaderText, html, from: senderFrom, replyTo },
    { tracking: true },
  );
  const tracking = trackingKey(keyring);
  const date = new Date();
  const raws: Buffer[] = [];
  for (let i = 0; i < RECIPIENTS; i++) {
    const own = Object.fromEntries(ownTags(i).map((t) => [t.tagName, t.tagValue]));
    raws.push(
      await renderEmail(compiled, {
        to: address(i + 1),
        sources: { own },
        messageId: `<${crypto.randomUUID()}@mail.localhost>`,
        urls: recipientUrls(tracking, 'http://localhost:8080', { recipientId: i + 1, sendId: 'bench' }),
        date,
      }),
    );
  }
  const mailer = createTransport({
    pool: true,
    host: '127.0.0.1',
    port: sinkPort,
    maxConnections: SMTP_POOL,
    maxMessages: 500,
  });
  const dkim = {
    domainName: key.domain,
    keySelector: key.selector,
    privateKey: key.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  };
  const started = Date.now();
  let next = 0;
  // As many in flight as Herald's send job keeps: the pool queues the rest.
  const lane = async () => {
    for (let i = next++; i < total; i = next++) {
      await mailer.sendMail({
        envelope: { from: 'bounces@mail.localhost', to: [address((i % RECIPIENTS) + 1)] },
        raw: raws[i % RECIPIENTS],
        dkim,
      });
    }
  };
  await Promise.all(Array.from({ length: 50 }, lane));
  const seconds = (Date.now() - started) / 1000;
  mailer.close();
  return total / seconds;
}

interface Figures {
  list: number;
  total: number;
  seconds: number;
  /** Over SMTP: plain nodemailer's messages/s in the same run. */
  plain: number | null;
  webhookSeconds: number | null;
  delivered: number;
  peakRss: number;
  loadBefore: number;
  loadAfter: number;
}

async function run(url: string, list: number): Promise<Figures> {
  const database = openDatabase(url, { poolSize: 2, procedures: PROCEDURE_MODULES });
  const receiver = await startWebhookCounter((e) => e.event === 'Delivered');
  const endpoint = ENDPOINT ? await startWebhookCounter((e) => e.event === 'Delivered') : undefined;
  const sink = SMTP ? await startSink() : undefined;
  let servers: Array<ReturnType<typeof spawn>> = [];
  const stop = async () => {
    for (const server of servers) server.kill('SIGTERM');
    await Promise.all(servers.map((server) => (server.exitCode === null ? once(server, 'exit') : undefined)));
  };
  try {
    await migrateToLatest(database);
    const password = 'correct horse battery staple';
    const account = await createAccount(database.db, systemClock, {
      userName: `bench-${Date.now()}@example.com`,
      password,
    });
    await updateAccountSettings(database.db, systemClock, account.id, { rateLimits: { email: 1_000_000 } });
    const customers = await seedCustomers(database, account.id, list);

    servers = startHeraldRoles(url, PORT, {
      EMAIL_TRANSPORT: sink ? `smtp://127.0.0.1:${sink.port}?pool=${SMTP_POOL}` : 'sandbox:',
    });
    const base = `http://127.0.0.1:${PORT}`;
    await waitForHealth(base);
    const headers = await authorizedHeaders(base, account, password);
    if (endpoint) {
      const body = JSON.stringify({ url: endpoint.url, events: ['email.events'] });
      const created = await post(new Agent(), `${base}/webhooks/endpoints`, headers, body);
      if (created.status !== 201) throw new Error(`/webhooks/endpoints answered ${created.status}: ${created.text}`);
    }

    const recipients = Array.from({ length: RECIPIENTS }, (_, i) => ({
      to: address(i + 1),
      personalizationSubstitutionTags: ownTags(i),
    }));
    const body = JSON.stringify({
      sendingDetails: {
        ...sendingDetails,
        emailBody: Buffer.from(html, 'utf8').toString('base64'),
        listId: [customers],
        webHookUrl: receiver.url,
      },
      recipients,
    });
    const total = RECIPIENTS + list;
    const loadBefore = loadavg()[0];
    console.log(
      `batch of ${total} (${RECIPIENTS} recipients + a list of ${list}); load average before: ${loadBefore.toFixed(2)}`,
    );
    const requested = Date.now();
    const accepted = await post(new Agent(), `${base}/email/batch`, headers, body);
    if (accepted.status !== 202) throw new Error(`/email/batch answered ${accepted.status}: ${accepted.text}`);
    const batchId = JSON.parse(accepted.text).data.BatchId as string;
    await untilCompleted(database, batchId);
    const loadAfter = loadavg()[0];
    let lastHandOver: number;
    if (sink) {
      // Over SMTP the measure ends at the batch's last answer recorded: its Completed.
      const { completed_at } = await database.db
        .selectFrom('sends')
        .select('completed_at')
        .where('id', '=', batchId)
        .executeTakeFirstOrThrow();
      lastHandOver = Number(completed_at);
      const taken = await sink.accepted();
      if (taken !== total) throw new Error(`the sink took ${taken} of the batch's ${total} messages`);
    } else {
      const { rows } = await sql<{
        n: number | string;
        last: number | string;
      }>`select count(*) as n, max(created_at) as last from sandbox_email where send_id = ${batchId}`.execute(
        database.db,
      );
      if (Number(rows[0].n) !== total)
        throw new Error(`the sandbox took ${rows[0].n} of the batch's ${total} messages`);
      lastHandOver = Number(rows[0].last);
    }
    const deadline = Date.now() + 120_000;
    while (receiver.counted() < total && Date.now() < deadline) await sleep(50);
    while (endpoint && endpoint.counted() < total && Date.now() < deadline) await sleep(50);
    if (endpoint && endpoint.counted() < total) throw new Error(`the endpoint got ${endpoint.counted()} of ${total}`);
    const peakRss = Math.max(...servers.map((server) => peakRssMiB(server.pid!)));
    await stop();
    const plain = sink ? await plainNodemailer(database, sink.port, total) : null;
    return {
      list,
      total,
      plain,
      seconds: (lastHandOver - requested) / 1000,
      webhookSeconds: receiver.counted() >= total ? (receiver.lastAt() - lastHandOver) / 1000 : null,
      delivered: receiver.counted(),
      peakRss,
      loadBefore,
      loadAfter,
    };
  } finally {
    await stop();
    await receiver.close();
    await endpoint?.close();
    await sink?.stop();
    await database.close();
  }
}

async function main(): Promise<void> {
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB; ` +
      `node ${process.version}; ${postgres ? 'postgres' : 'sqlite'}`,
  );
  const results: Figures[] = [];
  for (const list of LISTS) {
    if (postgres) results.push(await withFreshPostgres(requestedUrl!, [], () => run(requestedUrl!, list)));
    else {
      const dir = mkdtempSync(join(tmpdir(), 'herald-bench-email-'));
      try {
        results.push(await run(requestedUrl ?? `sqlite:${join(dir, 'herald.db')}`, list));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  const until = SMTP ? 'request to last answer recorded' : 'request to last hand-over     ';
  console.log(
    `batch     messages/s, ${until}   last Delivered webhook after it   peak RSS   load before / ` +
      `after${SMTP ? '   plain nodemailer   ratio' : ''}`,
  );
  for (const r of results) {
    const webhook =
      r.webhookSeconds === null ? `only ${r.delivered} of ${r.total} within 120 s` : `${r.webhookSeconds.toFixed(1)} s`;
    const rate = r.total / r.seconds;
    const plain = r.plain === null ? '' : `   ${r.plain.toFixed(0).padEnd(18)} ${(rate / r.plain).toFixed(2)}`;
    const cells = [
      String(r.total).padEnd(9),
      `${rate.toFixed(0)}   (${r.seconds.toFixed(1)} s)`.padEnd(42),
      webhook.padEnd(33),
      `${r.peakRss.toFixed(0)} MiB`.padEnd(10),
      `${r.loadBefore.toFixed(2)} / ${r.loadAfter.toFixed(2)}`.padEnd(13),
    ];
    console.log(cells.join(' ') + plain);
  }
}

await main();
