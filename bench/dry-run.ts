/**
 * The dry run (ARCHITECTURE.md, "Preflight"; docs/sms.md, "Dry run") as `herald serve` answers
 * it: `POST /sms/batch?dryRun=true` to a list of BENCH_SMALL (100,000) and BENCH_LARGE
 * (1,000,000) contacts, with an untagged text and with one whose tag each contact's property
 * fills (so every message is rendered and measured on its own). One contact in 50 has not
 * opted in and one in 100 is suppressed. While each dry run runs, the bench asks `/healthz`
 * every 20 ms (the longest answer shows whether the event loop stalled) and posts a passcode
 * (`/sms/single`) BENCH_OTP_RATE times a second (50; its p99 shows whether SQLite's writer was
 * held). It prints the same with no dry run first (the machine's own noise), then each run's
 * time, the longest /healthz, the passcodes' p99 and the server's peak RSS, on each of
 * BENCH_DATABASES (sqlite,postgres).
 *
 *   npm run bench:dry-run
 *   BENCH_DATABASES=sqlite BENCH_LARGE=200000 npm run bench:dry-run
 */
import { Agent } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAccount, updateAccountSettings } from '../src/accounts/service.ts';
import { systemClock } from '../src/clock.ts';
import { migrateToLatest, openDatabase, type Database } from '../src/db/database.ts';
import { PROCEDURE_MODULES } from '../src/server/procedures.ts';
import {
  authorizedHeaders,
  get,
  machine,
  peakRssMiB,
  post,
  quantile,
  sleep,
  startHeraldServe,
  steadyStream,
  stopProcess,
  waitForHealth,
  withBenchPostgres,
} from './herald-process.ts';
import { mobileContact, seedList } from './seed.ts';

const SMALL = Number(process.env.BENCH_SMALL ?? 100_000);
const LARGE = Number(process.env.BENCH_LARGE ?? 1_000_000);
const OTP_RATE = Number(process.env.BENCH_OTP_RATE ?? 50);
const DATABASES = (process.env.BENCH_DATABASES ?? 'sqlite,postgres').split(',');
const PORT = Number(process.env.BENCH_PORT ?? 18950);
const PASSWORD = 'bench-password-1';
const IDLE_SECONDS = 5;
const PROPERTY_ID = '00000000-0000-4000-8000-00000000f1a5';

const listMobile = (n: number) => `9198${String(n).padStart(8, '0')}`;
/** Passcodes go to numbers no contact holds. */
const passcodeMobile = (i: number) => `91970${String(i % 10_000_000).padStart(7, '0')}`;

/** The account, its first-name property, a list of LARGE contacts and one of the first SMALL of them. */
async function seed(database: Database) {
  const account = await createAccount(database.db, systemClock, {
    userName: `bench-dry-run-${Date.now()}@example.com`,
    password: PASSWORD,
  });
  await updateAccountSettings(database.db, systemClock, account.id, {
    rateLimits: { sms: 1_000_000, account: 1_000_000 },
  });
  await database.db
    .insertInto('contact_properties')
    .values({ id: PROPERTY_ID, account_id: account.id, name: 'firstName', name_key: 'firstname', created_at: 0 })
    .execute();
  const large = await seedList(database, account.id, LARGE, (n) => ({
    ...mobileContact(listMobile(n)),
    mobile_opt_in: n % 50 !== 0,
    properties: JSON.stringify({ [PROPERTY_ID]: `Name${n}` }),
  }));
  const small = crypto.randomUUID();
  await database.db
    .insertInto('contact_lists')
    .values({ id: small, account_id: account.id, name: 'Small', name_key: 'small', is_default: false, created_at: 0 })
    .execute();
  for (let start = 1; start <= SMALL; start += 10_000) {
    const ids = Array.from({ length: Math.min(10_000, SMALL - start + 1) }, (_, i) => start + i);
    await database.db
      .insertInto('list_members')
      .values(ids.map((id) => ({ list_id: small, contact_id: id, added_at: 0 })))
      .execute();
  }
  for (let start = 100; start <= LARGE; start += 100 * 2000) {
    const rows = [];
    for (let n = start; n <= Math.min(LARGE, start + 100 * 1999); n += 100)
      rows.push({
        account_id: account.id,
        channel: 'sms' as const,
        address: listMobile(n),
        reason: 'bench',
        created_at: 0,
      });
    await database.db.insertInto('suppressions').values(rows).execute();
  }
  return { account, lists: { [SMALL]: small, [LARGE]: large } };
}

interface Run {
  contacts: number;
  tagged: boolean;
  seconds: number;
  willSend: number;
  longestHealthMs: number;
  otpP99Ms: number;
  peakRssMiB: number;
}

/**
 * `work` with, beside it, /healthz asked every 20 ms and passcodes posted OTP_RATE a second:
 * the longest /healthz and the passcodes' p99 while it ran.
 */
async function beside<T>(base: string, headers: Record<string, string>, work: Promise<T>) {
  let longestHealthMs = 0;
  let probing = true;
  const healthAgent = new Agent({ keepAlive: true });
  const probe = (async () => {
    while (probing) {
      const begun = performance.now();
      await get(healthAgent, `${base}/healthz`);
      longestHealthMs = Math.max(longestHealthMs, performance.now() - begun);
      await sleep(20);
    }
  })();
  const otps = steadyStream(base, headers, OTP_RATE, (i) => ({
    path: '/sms/single',
    body: JSON.stringify({ recipient: passcodeMobile(i), senderName: 'HERALD', body: 'Code 1234' }),
    status: 202,
  }));
  let result: T;
  try {
    result = await work;
  } finally {
    probing = false;
    await probe;
    await otps.stop();
    healthAgent.destroy();
  }
  const otpP99Ms = quantile(
    [...otps.latencies].sort((a, b) => a - b),
    0.99,
  );
  return { result, longestHealthMs, otpP99Ms };
}

async function onDatabase(url: string): Promise<Run[]> {
  const database = openDatabase(url, { poolSize: 2, procedures: PROCEDURE_MODULES });
  let server: ReturnType<typeof startHeraldServe> | undefined;
  const runs: Run[] = [];
  try {
    await migrateToLatest(database);
    const seeded = Date.now();
    const { account, lists } = await seed(database);
    console.log(`  seeded ${LARGE} contacts in ${((Date.now() - seeded) / 1000).toFixed(0)} s`);
    server = startHeraldServe(url, PORT, {});
    const base = `http://127.0.0.1:${PORT}`;
    await waitForHealth(base);
    const headers = await authorizedHeaders(base, account, PASSWORD);
    // What the probe and the passcodes see with no dry run: the machine's own noise.
    const idle = await beside(base, headers, sleep(IDLE_SECONDS * 1000));
    console.log(
      `  no dry run, ${IDLE_SECONDS} s: longest /healthz ${idle.longestHealthMs.toFixed(0)} ms, ` +
        `passcodes' p99 ${idle.otpP99Ms.toFixed(0)} ms`,
    );
    for (const contacts of [SMALL, LARGE]) {
      for (const tagged of [false, true]) {
        const body = JSON.stringify({
          listId: [lists[contacts]],
          senderName: 'HERALD',
          body: tagged ? 'Hi [firstName], our sale starts today.' : 'Our sale starts today.',
        });
        const begun = performance.now();
        const {
          result: answer,
          longestHealthMs,
          otpP99Ms,
        } = await beside(base, headers, post(new Agent(), `${base}/sms/batch?dryRun=true`, headers, body));
        const seconds = (performance.now() - begun) / 1000;
        if (answer.status !== 200) throw new Error(`the dry run answered ${answer.status}: ${answer.text}`);
        const run: Run = {
          contacts,
          tagged,
          seconds,
          willSend: JSON.parse(answer.text).recipients.willSend,
          longestHealthMs,
          otpP99Ms,
          peakRssMiB: peakRssMiB(server.pid!),
        };
        console.log(
          `  ${contacts.toLocaleString('en')} contacts, ${tagged ? 'tagged  ' : 'untagged'}: ` +
            `${run.seconds.toFixed(1)} s (willSend ${run.willSend}), ` +
            `longest /healthz ${run.longestHealthMs.toFixed(0)} ms, ` +
            `passcodes' p99 ${run.otpP99Ms.toFixed(0)} ms, peak RSS ${run.peakRssMiB.toFixed(0)} MiB`,
        );
        runs.push(run);
      }
    }
  } finally {
    if (server) await stopProcess(server);
    await database.close();
  }
  return runs;
}

console.log(machine());
for (const name of DATABASES) {
  console.log(`${name}:`);
  if (name === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'herald-bench-dry-run-'));
    try {
      await onDatabase(`sqlite:${join(dir, 'herald.db')}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  } else {
    await withBenchPostgres('dry_run', onDatabase);
  }
}
