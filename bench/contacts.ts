/**
 * Contacts upserted per second through the HTTP API, from the first POST /contacts/batch to
 * the last batch applied by the queue, beside the same rows written by a plain SQL bulk
 * upsert in the same run, and the ratio (CRM issue, "Done when").
 *
 *   npm run bench:contacts                                                  # SQLite
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/herald_bench_contacts npm run bench:contacts
 *   BENCH_CONTACTS=100000 npm run bench:contacts                            # a shorter run
 *   BENCH_SHAPE=email BENCH_CONTACTS=100000 DATABASE_URL=… npm run bench:contacts
 *                            # contacts with only an email (or BENCH_SHAPE=mobile: only a mobile)
 *
 * On PostgreSQL the database named in DATABASE_URL is created (dropped first if it exists),
 * with a second one beside it for the plain upsert; both are dropped at the end.
 *
 * The load: BENCH_CONTACTS / 1000 requests of 1000 contacts, each with an email, a mobile,
 * opt-ins and 3 properties (two by id, one by name); with BENCH_SHAPE=email or mobile, each
 * has only that one, which the matching rules look up as "email and no mobile" or the reverse. The
 * first request is all new contacts; every later one is half new, half updates of contacts sent
 * earlier (a property changes, so each is a real update, not a skip). Herald runs as it is deployed
 * on each database: on SQLite one `herald serve` (API and worker in one process); on PostgreSQL
 * BENCH_ROLES (default `api,worker`: one API process and one worker process; `all` for a single
 * one). The peak RSS printed is the largest of them, read from /proc. The plain upsert writes the
 * same rows, 1000 a transaction, with one multi-row INSERT … ON CONFLICT (id) DO UPDATE (all go to
 * `All contacts`, which has no membership rows), through the bare driver into the same schema: the
 * floor of what storing these rows costs, without HTTP, validation, matching, the queue or
 * bookkeeping.
 *
 * It also prints whether the rate holds as the table grows: contacts/s over the first 10,000
 * applied and over the last 10,000, each from the apply times of ten consecutive batches
 * (their completedAt). On a database never analysed, a plan chosen without statistics once
 * made each batch slower than the last; flat means the last 10,000 take at most 1.5 times
 * as long as the first.
 */
import { once } from 'node:events';
import { Agent } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { migrateToLatest, openDatabase } from '../src/db/database.ts';
import { createAccount, updateAccountSettings } from '../src/accounts/service.ts';
import { createProperty } from '../src/crm/setup.ts';
import { systemClock } from '../src/clock.ts';
import {
  authorizedHeaders,
  peakRssMiB,
  post,
  startHeraldRoles,
  waitForHealth,
  withFreshPostgres,
} from './herald-process.ts';

const CONTACTS = Number(process.env.BENCH_CONTACTS ?? 1_000_000);
const PER_REQUEST = 1000;
const REQUESTS = Math.ceil(CONTACTS / PER_REQUEST);
/** Requests in flight at once, as a sync client with a small pool would send them. */
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 4);
const PORT = 18_590;
const SHAPES = ['both', 'email', 'mobile'] as const;
const SHAPE = (process.env.BENCH_SHAPE ?? 'both') as (typeof SHAPES)[number];
if (!SHAPES.includes(SHAPE)) throw new Error(`BENCH_SHAPE must be one of ${SHAPES.join(', ')}`);
/** Batches in a window of the flatness check: 10,000 contacts. */
const WINDOW = 10;
const requestedUrl = process.env.DATABASE_URL || undefined;
const postgres = requestedUrl?.startsWith('postgres') ?? false;

interface BenchContact {
  n: number;
  email: string;
  mobile: string;
  mobileOptIn: boolean;
  emailOptIn: boolean;
  /** How many times it was sent: the property `visits`, so each update changes something. */
  visits: number;
}

// A deterministic PRNG (mulberry32), so every run sends the same load.
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** The requests' contacts, in order: request i is indices [i*1000, i*1000+1000) of this. */
function plan(): BenchContact[][] {
  const next = random(42);
  const made: BenchContact[] = [];
  const make = (): BenchContact => {
    const n = made.length;
    // Indian mobiles 9xxxxxxxxx are all valid, and every n gets its own.
    const contact = {
      n,
      email: `contact${n}@bench.example.com`,
      mobile: String(9_000_000_000 + n),
      mobileOptIn: true,
      emailOptIn: n % 3 !== 0,
      visits: 0,
    };
    made.push(contact);
    return contact;
  };
  const requests: BenchContact[][] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const fresh = i === 0 ? PER_REQUEST : PER_REQUEST / 2;
    const batch = Array.from({ length: fresh }, make);
    const earlier = made.length - fresh;
    const chosen = new Set<number>();
    while (batch.length < PER_REQUEST) {
      const n = Math.floor(next() * earlier);
      if (chosen.has(n)) continue;
      chosen.add(n);
      batch.push(made[n]);
    }
    requests.push(batch);
  }
  return requests;
}

function body(contacts: BenchContact[], propertyIds: string[]): string {
  return JSON.stringify({
    createUpdateContacts: contacts.map((c) => ({
      ...(SHAPE === 'mobile' ? {} : { email: c.email }),
      ...(SHAPE === 'email' ? {} : { mobileCountryCode: '91', mobileNumber: c.mobile }),
      mobileOptIn: c.mobileOptIn,
      emailOptIn: c.emailOptIn,
      propertyfields: [
        { propertyid: propertyIds[0], propertyvalue: `First${c.n}` },
        { propertyid: propertyIds[1], propertyvalue: `City${c.n % 97}` },
        { propertyname: 'visits', propertyvalue: String(++c.visits) },
      ],
    })),
  });
}

interface Flatness {
  first: number;
  last: number;
  /** How much longer the last window took than the first. */
  slowdown: number;
}

/** contacts/s over the first and the last WINDOW batches, by their apply times. */
function flatness(appliedAt: number[]): Flatness | undefined {
  if (appliedAt.length < 2 * WINDOW + 1) return undefined;
  const span = (from: number) => appliedAt[from + WINDOW] - appliedAt[from];
  const [first, last] = [span(0), span(appliedAt.length - 1 - WINDOW)];
  return {
    first: (WINDOW * PER_REQUEST * 1000) / first,
    last: (WINDOW * PER_REQUEST * 1000) / last,
    slowdown: last / first,
  };
}

async function viaHttp(
  url: string,
  requests: BenchContact[][],
): Promise<{ rate: number; seconds: number; peakRss: number; flat: Flatness | undefined }> {
  const database = openDatabase(url, { poolSize: 2 });
  await migrateToLatest(database);
  const password = 'correct horse battery staple';
  const account = await createAccount(database.db, systemClock, {
    userName: `bench-${Date.now()}@example.com`,
    password,
  });
  await updateAccountSettings(database.db, systemClock, account.id, { rateLimits: { contacts: 1_000_000 } });
  const propertyIds = [
    (await createProperty(database.db, systemClock, account.id, 'firstName')).propertyid,
    (await createProperty(database.db, systemClock, account.id, 'city')).propertyid,
  ];
  await createProperty(database.db, systemClock, account.id, 'visits');

  const children = startHeraldRoles(url, PORT, {});
  const base = `http://127.0.0.1:${PORT}`;
  try {
    await waitForHealth(base);
    const headers = await authorizedHeaders(base, account, password);

    // The bodies are built before the clock starts: the client's JSON building is not what is measured.
    const bodies = requests.map((contacts) => Buffer.from(body(contacts, propertyIds)));
    const agent = new Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
    const started = performance.now();
    let next = 0;
    const batchIds: string[] = [];
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < requests.length) {
          const i = next++;
          const { status, text } = await post(agent, `${base}/contacts/batch`, headers, bodies[i]);
          bodies[i] = Buffer.alloc(0);
          if (status !== 202) throw new Error(`request ${i}: ${status} ${text}`);
          batchIds[i] = JSON.parse(text).data.BatchId;
        }
      }),
    );
    const accepted = performance.now();
    const appliedByThen = (
      await database.db
        .selectFrom('contact_batches')
        .select('id')
        .where('account_id', '=', account.id)
        .where('status', '=', 'Completed')
        .execute()
    ).length;
    for (;;) {
      const rows = await database.db
        .selectFrom('contact_batches')
        .select(['status'])
        .where('account_id', '=', account.id)
        .where('status', 'in', ['Queued', 'Failed'])
        .execute();
      if (rows.some((r) => r.status === 'Failed')) throw new Error('a batch failed');
      if (rows.length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const seconds = (performance.now() - started) / 1000;
    const peakRss = Math.max(...children.map((child) => peakRssMiB(child.pid!)));
    const applied = await database.db
      .selectFrom('contact_batches')
      .select('completed_at')
      .where('account_id', '=', account.id)
      .orderBy('completed_at')
      .execute();
    console.log(
      `  all ${requests.length} requests accepted after ${((accepted - started) / 1000).toFixed(1)} s ` +
        `(${appliedByThen} applied by then), all applied after ${seconds.toFixed(1)} s`,
    );
    return {
      rate: (requests.length * PER_REQUEST) / seconds,
      seconds,
      peakRss,
      flat: flatness(applied.map((row) => Number(row.completed_at))),
    };
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)));
    await database.close();
  }
}

/** The same rows by the plainest bulk upsert there is, through the bare driver. */
async function viaPlainSql(url: string, requests: BenchContact[][]): Promise<{ rate: number; seconds: number }> {
  const database = openDatabase(url, { poolSize: 1 });
  await migrateToLatest(database);
  const account = await createAccount(database.db, systemClock, {
    userName: `plain-${Date.now()}@example.com`,
    password: 'correct horse battery staple',
  });
  const propertyIds = [randomUUID(), randomUUID(), randomUUID()];
  await database.close();
  for (const c of requests.flat()) c.visits = 0;

  const columns =
    'id, account_id, email, mobile, mobile_country_code, mobile_opt_in, email_opt_in, properties, ' +
    'created_at, updated_at';
  const update =
    'on conflict (account_id, id) do update set email = excluded.email, mobile = excluded.mobile, ' +
    'mobile_country_code = excluded.mobile_country_code, ' +
    'mobile_opt_in = excluded.mobile_opt_in, email_opt_in = excluded.email_opt_in, properties = ' +
    'excluded.properties, updated_at = excluded.updated_at';
  const rowsOf = (contacts: BenchContact[], now: number) =>
    contacts.map((c) => [
      c.n + 1,
      account.id,
      SHAPE === 'mobile' ? null : c.email,
      SHAPE === 'email' ? null : `91${c.mobile}`,
      SHAPE === 'email' ? null : '91',
      c.mobileOptIn,
      c.emailOptIn,
      JSON.stringify({
        [propertyIds[0]]: `First${c.n}`,
        [propertyIds[1]]: `City${c.n % 97}`,
        [propertyIds[2]]: String(++c.visits),
      }),
      now,
      now,
    ]);

  const started = performance.now();
  if (postgres) {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    for (const contacts of requests) {
      const rows = rowsOf(contacts, Date.now());
      await client.query('begin');
      const placeholders = rows.map((_, r) => Array.from({ length: 10 }, (_, c) => `$${r * 10 + c + 1}`).join(', '));
      await client.query(
        `insert into contacts (${columns}) values ${placeholders.map((row) => `(${row})`).join(', ')} ${update}`,
        rows.flat(),
      );
      await client.query('commit');
    }
    await client.end();
  } else {
    const db = new DatabaseSync(url.slice('sqlite:'.length));
    // The same settings as Herald's own connection (src/db/sqlite-thread.ts), so only the work differs.
    db.exec(
      'PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA ' +
        'wal_autocheckpoint = 40000; PRAGMA cache_size = -16384',
    );
    const statements = new Map<string, ReturnType<DatabaseSync['prepare']>>();
    const prepared = (text: string) => statements.get(text) ?? statements.set(text, db.prepare(text)).get(text)!;
    for (const contacts of requests) {
      const rows = rowsOf(contacts, Date.now()).map((row) => row.map((v) => (typeof v === 'boolean' ? Number(v) : v)));
      db.exec('begin immediate');
      prepared(
        `insert into contacts (${columns}) ` +
          `values ${rows.map(() => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')} ${update}`,
      ).run(...(rows.flat() as Array<string | number | null>));
      db.exec('commit');
    }
    db.close();
  }
  const seconds = (performance.now() - started) / 1000;
  return { rate: (requests.length * PER_REQUEST) / seconds, seconds };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-bench-contacts-'));
  const httpUrl = requestedUrl ?? `sqlite:${join(dir, 'herald.db')}`;
  const plainUrl = postgres ? httpUrl.replace(/\/([^/?]+)(\?|$)/, '/$1_plain$2') : `sqlite:${join(dir, 'plain.db')}`;
  try {
    const run = async () => {
      const requests = plan();
      console.log(
        `machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB; ` +
          `node ${process.version}; ${postgres ? 'postgres' : 'sqlite'}`,
      );
      const shape = { both: 'email and mobile', email: 'email only', mobile: 'mobile only' }[SHAPE];
      console.log(
        `load: ${REQUESTS} requests × ${PER_REQUEST} contacts (${shape}; first all new, then half new, half ` +
          `updates), 3 properties each, ${IN_FLIGHT} in flight`,
      );
      const http = await viaHttp(httpUrl, requests);
      const plain = await viaPlainSql(plainUrl, requests);
      console.log('path                                contacts/s   seconds   peak RSS MiB');
      const rate = (run: { rate: number; seconds: number }) =>
        `${run.rate.toFixed(0).padStart(10)} ${run.seconds.toFixed(1).padStart(9)}`;
      console.log(`HTTP API → queue → applied         ${rate(http)} ${http.peakRss.toFixed(0).padStart(14)}`);
      console.log(`plain SQL bulk upsert              ${rate(plain)}`);
      console.log(`ratio HTTP / plain: ${(http.rate / plain.rate).toFixed(3)}`);
      if (http.flat) {
        const { first, last, slowdown } = http.flat;
        console.log(
          `applied contacts/s: first 10,000 ${first.toFixed(0)}, last 10,000 ` +
            `(to ${CONTACTS.toLocaleString('en')}) ${last.toFixed(0)}; the last took ${slowdown.toFixed(2)}× ` +
            `as long as the first: ${slowdown <= 1.5 ? 'flat' : 'NOT flat'} (target ≤ 1.5×)`,
        );
      }
    };
    if (postgres) await withFreshPostgres(httpUrl, ['plain'], run);
    else await run();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
