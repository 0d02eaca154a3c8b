/**
 * An email batch as `herald serve` runs it (one process: API and workers), through the sandbox
 * transport.
 *
 *   npm run bench:email                                                  # SQLite
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/herald_bench_email npm run bench:email
 *   BENCH_LISTS=99000 npm run bench:email                                # the large batch alone
 *   BENCH_PORT=18720 npm run bench:email                                 # beside another run (default 18700)
 *   BENCH_CPU_PROF=/tmp/prof npm run bench:email                         # the server's CPU profiles there
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
 *    the rows.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, Agent } from 'node:http';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { createAccount, updateAccountSettings } from '../src/accounts/service.ts';
import { systemClock } from '../src/clock.ts';
import { migrateToLatest, openDatabase, type Database } from '../src/db/database.ts';
import { PROCEDURE_MODULES } from '../src/procedures.ts';
import { authorizedHeaders, BENCH_ENCRYPTION_KEY, peakRssMiB, post, waitForHealth, withFreshPostgres } from './herald-process.ts';

const LISTS = (process.env.BENCH_LISTS ?? '19000,99000').split(',').map(Number);
const RECIPIENTS = 1000;
const PORT = Number(process.env.BENCH_PORT ?? 18_700);
const CPU_PROF = process.env.BENCH_CPU_PROF;
const requestedUrl = process.env.DATABASE_URL || undefined;
const postgres = requestedUrl?.startsWith('postgres') ?? false;
const html = readFileSync(new URL('fixtures/email-newsletter.html', import.meta.url), 'utf8');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Counts the Delivered events posted to it, and when the last post arrived. */
async function startReceiver(): Promise<{ url: string; delivered: () => number; lastAt: () => number; close: () => Promise<void> }> {
  let delivered = 0;
  let lastAt = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      delivered += (JSON.parse(Buffer.concat(chunks).toString()) as { data: Array<{ event: string }> }).data.filter((e) => e.event === 'Delivered').length;
      lastAt = Date.now();
      res.writeHead(204).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/hooks`, delivered: () => delivered, lastAt: () => lastAt, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const address = (n: number) => `customer${n}@example.com`;
const city = (n: number) => (n % 3 === 0 ? 'Zürich' : n % 3 === 1 ? 'Pune' : 'Lyon');
const plan = (n: number) => (n % 2 ? 'Gold' : 'Silver');

/** The list's contacts, written straight into the database: what is measured is sending to them. */
async function seedContacts(database: Database, accountId: string, listId: string, count: number): Promise<void> {
  const property = { firstName: crypto.randomUUID(), city: crypto.randomUUID(), plan: crypto.randomUUID() };
  await database.db
    .insertInto('contact_properties')
    .values(Object.entries(property).map(([name, id]) => ({ id, account_id: accountId, name, name_key: name.toLowerCase(), created_at: Date.now() })))
    .execute();
  for (let start = 0; start < count; start += 2000) {
    const rows = Array.from({ length: Math.min(2000, count - start) }, (_, i) => start + i + 1);
    await database.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('contacts')
        .values(rows.map((n) => ({
          id: n,
          account_id: accountId,
          email: address(RECIPIENTS + n),
          mobile: null,
          mobile_country_code: null,
          mobile_opt_in: false,
          email_opt_in: true,
          properties: JSON.stringify({ [property.firstName]: `Customer ${n}`, [property.city]: city(n), [property.plan]: plan(n) }),
          created_at: n,
          updated_at: n,
        })))
        .execute();
      await trx.insertInto('list_members').values(rows.map((n) => ({ list_id: listId, contact_id: n, added_at: n }))).execute();
    });
  }
}

async function untilCompleted(database: Database, batchId: string): Promise<void> {
  for (;;) {
    const row = await database.db.selectFrom('sends').select('status').where('id', '=', batchId).executeTakeFirstOrThrow();
    if (row.status === 'Completed') return;
    await sleep(100);
  }
}

interface Figures {
  list: number;
  total: number;
  seconds: number;
  webhookSeconds: number | null;
  delivered: number;
  peakRss: number;
  loadBefore: number;
  loadAfter: number;
}

async function run(url: string, list: number): Promise<Figures> {
  const database = openDatabase(url, { poolSize: 2, procedures: PROCEDURE_MODULES });
  const receiver = await startReceiver();
  let server: ReturnType<typeof spawn> | undefined;
  try {
    await migrateToLatest(database);
    const password = 'correct horse battery staple';
    const account = await createAccount(database.db, systemClock, { userName: `bench-${Date.now()}@example.com`, password });
    await updateAccountSettings(database.db, systemClock, account.id, { rateLimits: { email: 1_000_000 } });
    const customers = crypto.randomUUID();
    await database.db.insertInto('contact_lists').values({ id: customers, account_id: account.id, name: 'Customers', name_key: 'customers', is_default: false, created_at: Date.now() }).execute();
    await seedContacts(database, account.id, customers, list);

    const profile = CPU_PROF ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${CPU_PROF}` } : {};
    server = spawn('bin/herald', ['serve'], {
      env: { ...process.env, DATABASE_URL: url, PORT: String(PORT), WORKER_PORT: String(PORT + 1), LOG_LEVEL: 'warn', WEBHOOK_ALLOW_PRIVATE: 'true', ENCRYPTION_KEY: BENCH_ENCRYPTION_KEY, EMAIL_TRANSPORT: 'sandbox:', ...profile },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const base = `http://127.0.0.1:${PORT}`;
    await waitForHealth(base);
    const headers = await authorizedHeaders(base, account, password);

    const recipients = Array.from({ length: RECIPIENTS }, (_, i) => ({
      to: address(i + 1),
      personalizationSubstitutionTags: [
        { tagName: '[firstName]', tagValue: `Guest ${i + 1}` },
        { tagName: '[city]', tagValue: city(i) },
        { tagName: '[plan]', tagValue: plan(i) },
      ],
    }));
    const body = JSON.stringify({
      sendingDetails: {
        senderFrom: { email: 'news@mail.localhost', displayName: 'Example Shop' },
        replyTo: { email: 'help@mail.localhost', displayName: 'Help' },
        subject: 'Spring news for [firstName]',
        preHeaderText: 'Early access for [plan] members in [city]',
        emailBody: Buffer.from(html, 'utf8').toString('base64'),
        listId: [customers],
        webHookUrl: receiver.url,
      },
      recipients,
    });
    const total = RECIPIENTS + list;
    const loadBefore = loadavg()[0];
    console.log(`batch of ${total} (${RECIPIENTS} recipients + a list of ${list}); load average before: ${loadBefore.toFixed(2)}`);
    const requested = Date.now();
    const accepted = await post(new Agent(), `${base}/email/batch`, headers, body);
    if (accepted.status !== 202) throw new Error(`/email/batch answered ${accepted.status}: ${accepted.text}`);
    const batchId = JSON.parse(accepted.text).data.BatchId as string;
    await untilCompleted(database, batchId);
    const loadAfter = loadavg()[0];
    const { rows } = await sql<{ n: number | string; last: number | string }>`select count(*) as n, max(created_at) as last from sandbox_email where send_id = ${batchId}`.execute(database.db);
    if (Number(rows[0].n) !== total) throw new Error(`the sandbox took ${rows[0].n} of the batch's ${total} messages`);
    const lastHandOver = Number(rows[0].last);
    const deadline = Date.now() + 120_000;
    while (receiver.delivered() < total && Date.now() < deadline) await sleep(50);
    const peakRss = peakRssMiB(server.pid!);
    return {
      list,
      total,
      seconds: (lastHandOver - requested) / 1000,
      webhookSeconds: receiver.delivered() >= total ? (receiver.lastAt() - lastHandOver) / 1000 : null,
      delivered: receiver.delivered(),
      peakRss,
      loadBefore,
      loadAfter,
    };
  } finally {
    if (server) {
      server.kill('SIGTERM');
      if (server.exitCode === null) await once(server, 'exit');
    }
    await receiver.close();
    await database.close();
  }
}

async function main(): Promise<void> {
  console.log(`machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB; node ${process.version}; ${postgres ? 'postgres' : 'sqlite'}`);
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
  console.log('batch     messages/s, request to last hand-over   last Delivered webhook after it   peak RSS   load before / after');
  for (const r of results) {
    const webhook = r.webhookSeconds === null ? `only ${r.delivered} of ${r.total} within 120 s` : `${r.webhookSeconds.toFixed(1)} s`;
    console.log(`${String(r.total).padEnd(9)} ${`${(r.total / r.seconds).toFixed(0)}   (${r.seconds.toFixed(1)} s)`.padEnd(40)} ${webhook.padEnd(33)} ${`${r.peakRss.toFixed(0)} MiB`.padEnd(10)} ${r.loadBefore.toFixed(2)} / ${r.loadAfter.toFixed(2)}`);
  }
}

await main();
