/**
 * SMS as `herald serve` runs it (one process: API and workers), through the sandbox transport
 * or, with BENCH_TRANSPORT=smpp, over SMPP to `herald sim smsc` in a process of its own.
 *
 *   npm run bench:sms                                                   # SQLite
 *   BENCH_TRANSPORT=smpp npm run bench:sms                              # SQLite, over SMPP
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/herald_bench_sms npm run bench:sms
 *   BENCH_SECONDS=10 BENCH_LIST=49000 npm run bench:sms                 # a shorter run
 *   BENCH_PORT=18700 npm run bench:sms                                  # beside another run (default 18600)
 *   BENCH_CPU_PROF=/tmp/prof npm run bench:sms                          # the server's CPU profiles there
 *   BENCH_ENDPOINT=1 npm run bench:sms                                  # with a webhook endpoint too
 *
 * On PostgreSQL the database named in DATABASE_URL is created (dropped first) and dropped at
 * the end. Every send carries a webHookUrl on a local receiver; the account's rate limit is
 * raised for the run. It prints:
 *  (a) one-time passcodes: p50/p99 from POST /sms/single to the sandbox's submit (its record's
 *      time), at a steady BENCH_OTP_RATE requests/s (500) for BENCH_SECONDS (30), on an idle
 *      service (after a warm-up of WARM_UP_SECONDS at the same rate, not counted) and again
 *      while (b) runs;
 *  (b) one batch of 1,000 `recipients` plus a list of BENCH_LIST contacts (99,000): messages/s
 *      from the request to the last submit, the time until the last webhook event was
 *      received, and the server's peak RSS.
 * Over SMPP "submit" is the submit_sm's arrival at the simulator (its record of each part),
 * every message gets a DELIVRD receipt after BENCH_RECEIPT_DELAY_MS (1000), Herald binds as
 * SMS_TRANSPORT's defaults say (2 binds, a window of 50), and it also prints
 *  (c) the same number of messages pushed by a bare `smpp` client (bench/smpp-client.ts) to
 *      the same simulator with the same binds and window, registered_delivery 1 and every
 *      receipt answered: the protocol's pace on this machine, and Herald's share of it.
 * With BENCH_ENDPOINT=1 the account also has a webhook endpoint on `sms.status`, on a second
 * receiver, so every status event is appended, gathered and posted twice; it prints when that
 * receiver got its last event too.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { createAccount, updateAccountSettings } from '../src/accounts/service.ts';
import { systemClock } from '../src/clock.ts';
import { migrateToLatest, openDatabase, type Database } from '../src/db/database.ts';
import { PROCEDURE_MODULES } from '../src/server/procedures.ts';
import {
  authorizedHeaders,
  machine,
  type OtpRun,
  otpStream,
  peakRssMiB,
  post,
  quantile,
  sleep,
  startHeraldServe,
  startWebhookCounter,
  stopProcess,
  waitForHealth,
  withFreshPostgres,
} from './herald-process.ts';
import { startSimulator } from './sim-smsc.ts';
import { bareClientRate } from './smpp-client.ts';
import { mobileContact, seedList } from './seed.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 30);
const OTP_RATE = Number(process.env.BENCH_OTP_RATE ?? 500);
const LIST = Number(process.env.BENCH_LIST ?? 99_000);
const WARM_UP_SECONDS = 2;
const ENDPOINT = process.env.BENCH_ENDPOINT === '1';
const RECIPIENTS = 1000;
const SMPP = process.env.BENCH_TRANSPORT === 'smpp';
const RECEIPT_DELAY_MS = Number(process.env.BENCH_RECEIPT_DELAY_MS ?? 1000);
/** SMS_TRANSPORT's defaults for smpp://, which the bare client of (c) matches. */
const BINDS = 2;
const WINDOW = 50;
const PORT = Number(process.env.BENCH_PORT ?? 18_600);
const requestedUrl = process.env.DATABASE_URL || undefined;
const postgres = requestedUrl?.startsWith('postgres') ?? false;

function mobile(n: number): string {
  return String(919_000_000_000 + n);
}

const otpRecipient = (i: number) => mobile(900_000 + i);

/**
 * When each message's first part was submitted, by recipient: the sandbox's record, or the
 * simulator's of the submit_sm's arrival.
 */
interface SubmitClock {
  submitted(database: Database, sendIds: string[]): Promise<Map<string, number>>;
}

const sandboxClock: SubmitClock = {
  async submitted(database, sendIds) {
    const rows: Array<{ recipient: string; created_at: number }> = [];
    for (let start = 0; start < sendIds.length; start += 5000) {
      // One push per row: spread as arguments, a batch of 200,000 overflowed the call stack.
      for (const row of await database.db
        .selectFrom('sandbox_sms')
        .select(['recipient', 'created_at'])
        .where('send_id', 'in', sendIds.slice(start, start + 5000))
        .where('part', '=', 1)
        .execute())
        rows.push(row);
    }
    return new Map(rows.map((row) => [row.recipient, Number(row.created_at)]));
  },
};

async function untilCompleted(database: Database, sendIds: string[]): Promise<void> {
  for (;;) {
    let open = 0;
    for (let start = 0; start < sendIds.length; start += 5000) {
      const ids = sql.join(sendIds.slice(start, start + 5000));
      const { rows } = await sql<{ n: number }>`select count(*) as n from sends
        where status <> 'Completed' and id in (${ids})`.execute(database.db);
      open += Number(rows[0].n);
    }
    if (open === 0) return;
    await sleep(50);
  }
}

/** Request-to-submit latencies of the passcodes, once every one has been submitted. */
async function otpLatencies(
  database: Database,
  clock: SubmitClock,
  run: OtpRun,
): Promise<{ p50: number; p99: number; count: number }> {
  const ids = [...run.queueIds.keys()];
  await untilCompleted(database, ids);
  const submitted = await clock.submitted(database, ids);
  const latencies = [...run.sentTo]
    .flatMap(([recipient, sentAt]) => (submitted.has(recipient) ? [submitted.get(recipient)! - sentAt] : []))
    .sort((a, b) => a - b);
  return { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99), count: latencies.length };
}

async function run(url: string): Promise<void> {
  const database = openDatabase(url, { poolSize: 2, procedures: PROCEDURE_MODULES });
  await migrateToLatest(database);
  const password = 'correct horse battery staple';
  const account = await createAccount(database.db, systemClock, {
    userName: `bench-${Date.now()}@example.com`,
    password,
  });
  await updateAccountSettings(database.db, systemClock, account.id, { rateLimits: { sms: 1_000_000 } });
  const customers = await seedList(database, account.id, LIST, (n) => mobileContact(mobile(RECIPIENTS + n)));

  const receiver = await startWebhookCounter((e) => e.status === 'Delivered' || e.status === 'Failed');
  const endpoint = ENDPOINT
    ? await startWebhookCounter((e) => e.status === 'Delivered' || e.status === 'Failed')
    : undefined;
  const simulator = SMPP
    ? await startSimulator(['--receipt-delay-ms', String(RECEIPT_DELAY_MS), '--retain', '400000'])
    : undefined;
  const clock: SubmitClock = simulator ? { submitted: () => simulator.arrivals() } : sandboxClock;
  const transport = simulator
    ? { SMS_TRANSPORT: `smpp://bench:bench@127.0.0.1:${simulator.port}?binds=${BINDS}&window=${WINDOW}` }
    : {};
  const server = startHeraldServe(url, PORT, transport);
  const base = `http://127.0.0.1:${PORT}`;
  try {
    await waitForHealth(base);
    const headers = await authorizedHeaders(base, account, password);
    if (endpoint) {
      const body = JSON.stringify({ url: endpoint.url, events: ['sms.status'] });
      const created = await post(new Agent(), `${base}/webhooks/endpoints`, headers, body);
      if (created.status !== 201) throw new Error(`/webhooks/endpoints answered ${created.status}: ${created.text}`);
    }

    // A process just started runs its code unoptimised for its first second or so (V8 compiles
    // the hot paths as they run): passcodes sent then took 40 to 100 ms, a third of the idle
    // run's slowest hundredth. The service is warmed up first, as one long running would be.
    console.log(`warm-up: POST /sms/single at ${OTP_RATE}/s for ${WARM_UP_SECONDS} s, not counted`);
    const warmUp = otpStream(base, headers, receiver.url, OTP_RATE, otpRecipient);
    await sleep(WARM_UP_SECONDS * 1000);
    await warmUp.stop();
    await otpLatencies(database, clock, warmUp);
    // The passcodes' recipients repeat from one run to the next: the simulator keeps one run's.
    await simulator?.reset();

    console.log(`(a) POST /sms/single at ${OTP_RATE}/s for ${SECONDS} s, idle service`);
    const idle = otpStream(base, headers, receiver.url, OTP_RATE, otpRecipient);
    await sleep(SECONDS * 1000);
    await idle.stop();
    const idleLatency = await otpLatencies(database, clock, idle);
    await simulator?.reset();

    console.log(`(b) one batch: ${RECIPIENTS} recipients + a list of ${LIST} contacts, with (a) running beside it`);
    const recipients = Array.from({ length: RECIPIENTS }, (_, i) => ({ mobileNo: mobile(i + 1) }));
    const eventsBefore = receiver.counted();
    const endpointBefore = endpoint?.counted() ?? 0;
    const busy = otpStream(base, headers, receiver.url, OTP_RATE, otpRecipient);
    const requested = Date.now();
    const accepted = await post(
      new Agent(),
      `${base}/sms/batch`,
      headers,
      JSON.stringify({
        listId: [customers],
        recipients,
        senderName: 'HERALD',
        body: 'Our sale starts today: 20% off everything.',
        webHookUrl: receiver.url,
      }),
    );
    if (accepted.status !== 202) throw new Error(`/sms/batch answered ${accepted.status}: ${accepted.text}`);
    const batchId = JSON.parse(accepted.text).data.QueueId as string;
    await untilCompleted(database, [batchId]);
    await busy.stop();
    const busyLatency = await otpLatencies(database, clock, busy);
    const batchSubmits = [...(await clock.submitted(database, [batchId])).entries()].filter(
      ([recipient]) => !busy.sentTo.has(recipient),
    );
    const lastSubmit = batchSubmits.reduce((last, [, at]) => Math.max(last, at), 0);
    const total = RECIPIENTS + LIST;
    if (batchSubmits.length !== total)
      throw new Error(`the transport took ${batchSubmits.length} of the batch's ${total} messages`);
    const seconds = (lastSubmit - requested) / 1000;
    const expectedEvents = eventsBefore + total + busy.queueIds.size;
    const deadline = Date.now() + 120_000;
    while (receiver.counted() < expectedEvents && Date.now() < deadline) await sleep(50);
    const endpointExpected = endpointBefore + total + busy.queueIds.size;
    while (endpoint && endpoint.counted() < endpointExpected && Date.now() < deadline) await sleep(50);
    const peakRss = peakRssMiB(server.pid!);

    console.log('figure                                              value');
    console.log(
      'OTP request → submit, idle: p50 / p99 (ms)         ' +
        `${idleLatency.p50} / ${idleLatency.p99}   (${idleLatency.count} sends)`,
    );
    console.log(
      'OTP request → submit, during the batch (ms)        ' +
        `${busyLatency.p50} / ${busyLatency.p99}   (${busyLatency.count} sends)`,
    );
    console.log(
      'batch: messages/s, request to last submit          ' +
        `${(total / seconds).toFixed(0)}   (${total} in ${seconds.toFixed(1)} s)`,
    );
    const lastEvent =
      receiver.counted() >= expectedEvents
        ? `${((receiver.lastAt() - lastSubmit) / 1000).toFixed(1)} s`
        : `only ${receiver.counted() - eventsBefore} of ${expectedEvents - eventsBefore} events within 120 s`;
    console.log(`batch: last webhook event after the last submit    ${lastEvent}`);
    if (endpoint) {
      const last =
        endpoint.counted() >= endpointExpected
          ? `${((endpoint.lastAt() - lastSubmit) / 1000).toFixed(1)} s`
          : `only ${endpoint.counted() - endpointBefore} of ${endpointExpected - endpointBefore} events within 120 s`;
      console.log(`batch: endpoint's last event after the last submit ${last}`);
    }
    console.log(`peak RSS of herald serve (MiB)                      ${peakRss.toFixed(0)}`);
    if (simulator) {
      await stopProcess(server);
      await simulator.reset();
      const bare = await bareClientRate(simulator.port, total, BINDS, WINDOW);
      console.log(
        `(c) bare smpp client, ${BINDS} binds × window ${WINDOW}: messages/s   ` +
          `${bare.toFixed(0)}   (Herald: ${(total / seconds / bare).toFixed(2)} of it)`,
      );
    }
  } finally {
    await stopProcess(server);
    await simulator?.stop();
    await receiver.close();
    await endpoint?.close();
    await database.close();
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-bench-sms-'));
  const url = requestedUrl ?? `sqlite:${join(dir, 'herald.db')}`;
  console.log(`${machine()}; ${postgres ? 'postgres' : 'sqlite'}`);
  try {
    if (postgres) await withFreshPostgres(url, [], () => run(url));
    else await run(url);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
