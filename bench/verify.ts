/**
 * Verify (docs/verify.md) as `herald serve` runs it (one process: API and workers), sending
 * over SMPP to `herald sim smsc` in a process of its own (SMS_TRANSPORT's defaults: 2 binds, a
 * window of 50; every message receipted DELIVRD after 1 s). Each round runs on a fresh
 * database, BENCH_ROUNDS (3) rounds on each of BENCH_DATABASES (sqlite,postgres) in turn:
 *  (a) POST /verify at a steady BENCH_OTP_RATE a second (200) for BENCH_SECONDS (10), after a
 *      warm-up of WARM_UP_SECONDS at the same rate, not counted: p50/p99 from the request to
 *      its code's submit_sm reaching the simulator, on an idle service; then again beside a
 *      campaign (one /sms/batch to a list of BENCH_LIST contacts, 50,000), from just before
 *      the batch is requested until its last message is submitted (60 s at most);
 *  (c) POST /verify/{id}/check at an open-loop BENCH_CHECK_RATE a second (1,000) for
 *      BENCH_SECONDS, after a second at the same rate, not counted: the request's p50/p99;
 *  (b) checks, then GET /account, in a closed loop of 50 requests in flight for
 *      BENCH_CLOSED_SECONDS each (5): requests/s of each, and checks / GET /account.
 * Then the medians of each database's rounds, beside the targets.
 *
 *   npm run bench:verify                                             # SQLite, then PostgreSQL
 *   BENCH_DATABASES=sqlite BENCH_ROUNDS=1 BENCH_SECONDS=3 BENCH_LIST=10000 npm run bench:verify
 *   BENCH_PORT=19000 npm run bench:verify                            # beside another run (default 18900)
 *   BENCH_POSTGRES_URL=postgres://… npm run bench:verify             # another PostgreSQL server
 *
 * Every POST /verify goes to a number of its own, so the limits on one number (a code per
 * 30 s, 5 per 10 minutes) never refuse one; the numbers spread over 900 prefixes (+91 9100 to
 * +91 9999), as real traffic does, and the account's prefixLimit is raised besides, so that a
 * longer run is not refused by the fraud guard either. The account's rate limits are raised.
 *
 * The checks' verifications are written straight into the database before the server starts,
 * each with a code hashed as POST /verify hashes it (under the key Herald then reads): what is
 * measured is checking, not sending. They belong to an account of their own, so the account of
 * (a) holds only the codes (a) sends and its limits count nothing else. Each check gives a wrong
 * code, and each verification takes at most 4, so all stay pending (a fifth would fail it); the
 * checks go round the verifications, so two never check one verification at once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAccount, updateAccountSettings } from '../src/accounts/service.ts';
import { systemClock } from '../src/clock.ts';
import { migrateToLatest, openDatabase, type Database } from '../src/db/database.ts';
import { Keyring, keyFromHex } from '../src/sealed.ts';
import { PROCEDURE_MODULES } from '../src/server/procedures.ts';
import { codeHash, codeKey, newCode } from '../src/verify/codes.ts';
import { MOST_CHECKS } from '../src/verify/record.ts';
import {
  authorizedHeaders,
  BENCH_ENCRYPTION_KEY,
  type BenchRequest,
  closedLoop,
  cpuSeconds,
  machine,
  post,
  postgresPids,
  quantile,
  sleep,
  startHeraldServe,
  startWebhookCounter,
  type SteadyRun,
  steadyStream,
  stopProcess,
  waitForHealth,
  withBenchPostgres,
} from './herald-process.ts';
import { mobileContact, seedList } from './seed.ts';
import { type SimulatorProcess, startSimulator } from './sim-smsc.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DATABASES = (process.env.BENCH_DATABASES ?? 'sqlite,postgres').split(',');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CLOSED_SECONDS = Number(process.env.BENCH_CLOSED_SECONDS ?? 5);
const OTP_RATE = Number(process.env.BENCH_OTP_RATE ?? 200);
const CHECK_RATE = Number(process.env.BENCH_CHECK_RATE ?? 1000);
const LIST = Number(process.env.BENCH_LIST ?? 50_000);
const PORT = Number(process.env.BENCH_PORT ?? 18_900);
const WARM_UP_SECONDS = 2;
const CHECK_WARM_UP_SECONDS = 1;
const MOST_BESIDE_SECONDS = 60;
const CONCURRENCY = 50;
const RECEIPT_DELAY_MS = 1000;
/** SMS_TRANSPORT's defaults for smpp://. */
const BINDS = 2;
const WINDOW = 50;
const PASSWORD = 'correct horse battery staple';
const TARGETS = { idleP99: 50, busyP99: 150, checkP99: 20, ratio: 0.5 };

/** Wrong checks one verification takes and stays pending: the next would fail it. */
const CHECKS_EACH = MOST_CHECKS - 1;
/** Verifications a round checks: enough for (c), and for (b) at up to 25,000 checks a second. */
const CHECK_POOL = Math.ceil((CHECK_RATE * (SECONDS + CHECK_WARM_UP_SECONDS) + 25_000 * CLOSED_SECONDS) / CHECKS_EACH);

/** The list's numbers, 919000000001 on: none shares a prefix with a code's number. */
const listMobile = (n: number) => String(919_000_000_000 + n);

const PREFIXES = 900;
let codesSent = 0;
/** A number no code of this run went to: +91 9100 to 9999 in turn, then the next six digits. */
function freshMobile(): string {
  const n = codesSent++;
  return `91${9100 + (n % PREFIXES)}${String(Math.floor(n / PREFIXES)).padStart(6, '0')}`;
}

interface Round {
  idle: CodeLatency;
  busy: CodeLatency;
  /** From the campaign's request until its last message was submitted, s. */
  campaignSeconds: number;
  /** Whether the codes went on until the campaign's last submit (not stopped at MOST_BESIDE_SECONDS). */
  codesToTheEnd: boolean;
  check: Latency;
  checks: Throughput;
  account: Throughput;
}

/** A closed loop's requests a second, and the CPU ms each took of Herald, PostgreSQL and the load generator. */
interface Throughput {
  perSecond: number;
  cpu: { herald: number; postgres: number; client: number };
}

interface Latency {
  p50: number;
  p99: number;
  count: number;
}

/** Codes' latencies to their submit_sm, and their requests' to the 201. */
interface CodeLatency extends Latency {
  answer: Latency;
}

const latencyOf = (values: number[]): Latency => {
  const sorted = values.toSorted((a, b) => a - b);
  return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), count: sorted.length };
};

const median = (values: number[]) =>
  quantile(
    values.toSorted((a, b) => a - b),
    0.5,
  );

/** POST /verify to a fresh number at OTP_RATE a second, until stopped. */
const codeStream = (base: string, headers: Record<string, string>): SteadyRun =>
  steadyStream(base, headers, OTP_RATE, () => {
    const to = freshMobile();
    return { path: '/verify', body: JSON.stringify({ to }), status: 201, key: to };
  });

/** From each request of `run` to its code's submit_sm at the simulator, once every code has arrived. */
async function submitLatency(simulator: SimulatorProcess, run: SteadyRun): Promise<CodeLatency> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const arrivals = await simulator.arrivals();
    const missing = [...run.sentTo.keys()].filter((to) => !arrivals.has(to)).length;
    if (missing === 0) {
      const submits = latencyOf([...run.sentTo].map(([to, sentAt]) => arrivals.get(to)! - sentAt));
      return { ...submits, answer: latencyOf(run.latencies) };
    }
    if (Date.now() > deadline)
      throw new Error(`${missing} of ${run.sentTo.size} codes did not reach the simulator within 60 s`);
    await sleep(250);
  }
}

/** `seconds` of codes at OTP_RATE: their latencies to the simulator, which is then emptied. */
async function codesFor(
  seconds: number,
  base: string,
  headers: Record<string, string>,
  simulator: SimulatorProcess,
): Promise<CodeLatency> {
  const run = codeStream(base, headers);
  await sleep(seconds * 1000);
  await run.stop();
  const latency = await submitLatency(simulator, run);
  await simulator.reset();
  return latency;
}

/**
 * CHECK_POOL pending verifications of the account, written as POST /verify writes them, with
 * the wrong code of each: the right one with its last digit moved on.
 */
async function seedVerifications(database: Database, accountId: string): Promise<Array<{ id: string; code: string }>> {
  const key = await codeKey(database.db, new Keyring(keyFromHex(BENCH_ENCRYPTION_KEY)!));
  const now = Date.now();
  const pool: Array<{ id: string; code: string }> = [];
  for (let start = 0; start < CHECK_POOL; start += 1000) {
    const rows = Array.from({ length: Math.min(1000, CHECK_POOL - start) }, (_, i) => {
      const code = newCode(6);
      const id = crypto.randomUUID();
      pool.push({ id, code: code.slice(0, 5) + ((Number(code[5]) + 1) % 10) });
      // +91 88…: none of the codes' numbers, which POST /verify would take for resends.
      const recipient = `9188${String(start + i).padStart(8, '0')}`;
      return {
        id,
        account_id: accountId,
        channel: 'sms' as const,
        recipient,
        country: 'IN',
        prefix: recipient.slice(0, 6),
        code_hash: codeHash(key, code),
        status: 'pending' as const,
        attempts_left: MOST_CHECKS,
        send_attempts: 1,
        last_sent_at: now,
        expires_at: now + 3_600_000,
        webhook_url: null,
        created_at: now,
        ended_at: null,
      };
    });
    await database.db.insertInto('verifications').values(rows).execute();
  }
  return pool;
}

/** An account named `name`, its rate limits and Verify's prefixLimit out of the way. */
async function benchAccount(database: Database, name: string) {
  const account = await createAccount(database.db, systemClock, {
    userName: `bench-${name}-${Date.now()}@example.com`,
    password: PASSWORD,
  });
  await updateAccountSettings(database.db, systemClock, account.id, {
    rateLimits: { sms: 1_000_000, verify: 1_000_000, account: 1_000_000 },
    verify: { allowedCountries: null, prefixLimit: 1_000_000 },
  });
  return account;
}

/** Whether the send `id` handed all its messages to the transport within `seconds` (resolves as soon as it has). */
async function submittedWithin(database: Database, id: string, seconds: number): Promise<boolean> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const send = await database.db.selectFrom('sends').select('status').where('id', '=', id).executeTakeFirst();
    if (send?.status === 'Completed') return true;
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
}

async function round(
  url: string,
  simulator: SimulatorProcess,
  receiver: Awaited<ReturnType<typeof startWebhookCounter>>,
): Promise<Round> {
  const database = openDatabase(url, { poolSize: 2, procedures: PROCEDURE_MODULES });
  let server: ReturnType<typeof startHeraldServe> | undefined;
  try {
    await migrateToLatest(database);
    const account = await benchAccount(database, 'codes');
    const checker = await benchAccount(database, 'checks');
    const listId = await seedList(database, account.id, LIST, (n) => mobileContact(listMobile(n)));
    const pool = await seedVerifications(database, checker.id);
    await simulator.reset();
    server = startHeraldServe(url, PORT, {
      SMS_TRANSPORT: `smpp://bench:bench@127.0.0.1:${simulator.port}?binds=${BINDS}&window=${WINDOW}`,
    });
    const base = `http://127.0.0.1:${PORT}`;
    await waitForHealth(base);
    const headers = await authorizedHeaders(base, account, PASSWORD);
    const checkHeaders = await authorizedHeaders(base, checker, PASSWORD);

    // A process just started runs its code unoptimised for its first second or so: the
    // service is warmed up first, as one long running would be.
    await codesFor(WARM_UP_SECONDS, base, headers, simulator);
    const idle = await codesFor(SECONDS, base, headers, simulator);

    const delivered = receiver.counted();
    const busyRun = codeStream(base, headers);
    const requested = performance.now();
    const accepted = await post(
      new Agent(),
      `${base}/sms/batch`,
      headers,
      JSON.stringify({
        listId: [listId],
        senderName: 'HERALD',
        body: 'Our sale starts today.',
        webHookUrl: receiver.url,
      }),
    );
    if (accepted.status !== 202) throw new Error(`/sms/batch answered ${accepted.status}: ${accepted.text}`);
    const campaignId = JSON.parse(accepted.text).data.QueueId as string;
    // A service that falls behind the codes can slow the campaign beside them without end:
    // the codes stop after MOST_BESIDE_SECONDS, and the round goes on.
    const codesToTheEnd = await submittedWithin(database, campaignId, MOST_BESIDE_SECONDS);
    await busyRun.stop();
    if (!(await submittedWithin(database, campaignId, 300)))
      throw new Error('the campaign was not submitted within 300 s of the codes beside it stopping');
    const campaignSeconds = (performance.now() - requested) / 1000;
    const busy = await submitLatency(simulator, busyRun);
    // The campaign's receipts are taken and posted before the checks start, so they run on an
    // idle service.
    const deadline = Date.now() + 120_000;
    while (receiver.counted() < delivered + LIST) {
      if (Date.now() > deadline)
        throw new Error(`only ${receiver.counted() - delivered} of ${LIST} final events within 120 s`);
      await sleep(100);
    }
    await simulator.reset();

    let checksMade = 0;
    const nextCheck = (): BenchRequest => {
      const n = checksMade++;
      if (n >= CHECK_POOL * CHECKS_EACH) throw new Error(`more than the ${CHECK_POOL * CHECKS_EACH} checks prepared`);
      const { id, code } = pool[n % CHECK_POOL];
      return { path: `/verify/${id}/check`, body: JSON.stringify({ code }), status: 200 };
    };
    // A wrong code leaves a verification pending; one chance in a million made the wrong code right.
    const stillChecks = (text: string) => {
      const { status } = JSON.parse(text) as { status: string };
      if (status !== 'pending' && status !== 'approved') throw new Error(`a check answered ${status}`);
    };
    const checkStream = async (seconds: number) => {
      const run = steadyStream(base, checkHeaders, CHECK_RATE, nextCheck, stillChecks);
      await sleep(seconds * 1000);
      await run.stop();
      return latencyOf(run.latencies);
    };
    await checkStream(CHECK_WARM_UP_SECONDS);
    const check = await checkStream(SECONDS);

    const serverPid = server.pid!;
    const throughput = async (loop: () => Promise<{ count: number; perSecond: number }>): Promise<Throughput> => {
      const cpuNow = () => {
        const { user, system } = process.cpuUsage();
        return { herald: cpuSeconds([serverPid]), postgres: cpuSeconds(postgresPids()), client: (user + system) / 1e6 };
      };
      const before = cpuNow();
      const { count, perSecond } = await loop();
      const after = cpuNow();
      const each = (key: keyof typeof before) => ((after[key] - before[key]) * 1000) / count;
      return { perSecond, cpu: { herald: each('herald'), postgres: each('postgres'), client: each('client') } };
    };
    const checkLoop = await throughput(() =>
      closedLoop(base, checkHeaders, CONCURRENCY, CLOSED_SECONDS, nextCheck, stillChecks),
    );
    const accountHeaders = { authorization: checkHeaders.authorization };
    const accountLoop = await throughput(() =>
      closedLoop(base, accountHeaders, CONCURRENCY, CLOSED_SECONDS, () => ({
        method: 'GET',
        path: '/account',
        status: 200,
      })),
    );
    return { idle, busy, campaignSeconds, codesToTheEnd, check, checks: checkLoop, account: accountLoop };
  } finally {
    if (server) await stopProcess(server);
    await database.close();
  }
}

async function onSqlite<T>(body: (url: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-bench-verify-'));
  try {
    return await body(`sqlite:${join(dir, 'herald.db')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const ms = (latency: Latency) => `${latency.p50.toFixed(1)} / ${latency.p99.toFixed(1)} ms`;
const met = (ok: boolean) => (ok ? 'met' : 'MISSED');
const target = (p99: number, most: number) => `target p99 ≤ ${most} ms: ${met(p99 <= most)}`;
const line = (figure: string, value: string, note = '') =>
  console.log(`  ${figure.padEnd(48)}${value.padEnd(20)}${note}`);

function printRound(result: Round, postgres: boolean): void {
  const { idle, busy, check, checks, account } = result;
  const answered = (latency: CodeLatency) => `(${latency.count} codes; 201 in ${ms(latency.answer)})`;
  line('(a) POST /verify → submit_sm, idle: p50 / p99', ms(idle), answered(idle));
  line('(a) the same beside the campaign', ms(busy), answered(busy));
  const seconds = result.campaignSeconds;
  const stopped = result.codesToTheEnd ? '' : `; the codes stopped after ${MOST_BESIDE_SECONDS} s`;
  line(
    '    the campaign: request to last submit',
    `${seconds.toFixed(1)} s`,
    `(${(LIST / seconds).toFixed(0)}/s${stopped})`,
  );
  line(`(c) check at ${CHECK_RATE}/s, open loop: p50 / p99`, ms(check), `(${check.count} checks)`);
  line(`(b) checks/s, ${CONCURRENCY} in flight`, checks.perSecond.toFixed(0), cpu(checks, postgres));
  line(`(b) GET /account/s, ${CONCURRENCY} in flight`, account.perSecond.toFixed(0), cpu(account, postgres));
  line('(b) checks / GET /account', (checks.perSecond / account.perSecond).toFixed(2));
}

/** CPU ms a request of each process, PostgreSQL's on PostgreSQL only. */
function cpu({ cpu: { herald, postgres, client } }: Throughput, postgresToo: boolean): string {
  return (
    `(CPU ms a request: herald ${herald.toFixed(3)}` +
    `${postgresToo ? `, postgres ${postgres.toFixed(3)}` : ''}, client ${client.toFixed(3)})`
  );
}

function printMedians(name: string, results: Round[]): void {
  const of = (pick: (result: Round) => number) => median(results.map(pick));
  const p50p99 = (pick: (result: Round) => Latency) =>
    `${of((r) => pick(r).p50).toFixed(1)} / ${of((r) => pick(r).p99).toFixed(1)} ms`;
  const idleP99 = of((r) => r.idle.p99);
  const busyP99 = of((r) => r.busy.p99);
  const checkP99 = of((r) => r.check.p99);
  const ratio = of((r) => r.checks.perSecond / r.account.perSecond);
  console.log(`${name}: medians of ${results.length} rounds`);
  line(
    '(a) POST /verify → submit_sm, idle: p50 / p99',
    p50p99((r) => r.idle),
    target(idleP99, TARGETS.idleP99),
  );
  line(
    '(a) the same beside the campaign',
    p50p99((r) => r.busy),
    target(busyP99, TARGETS.busyP99),
  );
  line(
    `(c) check at ${CHECK_RATE}/s, open loop: p50 / p99`,
    p50p99((r) => r.check),
    target(checkP99, TARGETS.checkP99),
  );
  line(`(b) checks/s, ${CONCURRENCY} in flight`, of((r) => r.checks.perSecond).toFixed(0));
  line(`(b) GET /account/s, ${CONCURRENCY} in flight`, of((r) => r.account.perSecond).toFixed(0));
  line('(b) checks / GET /account', ratio.toFixed(2), `target ≥ ${TARGETS.ratio}: ${met(ratio >= TARGETS.ratio)}`);
}

// Other work on the machine skews every figure: the load average before the run tells of any.
console.log(`${machine()}; load average ${loadavg()[0].toFixed(2)}`);
console.log(
  `SMPP: ${BINDS} binds × window ${WINDOW}, receipts after ${RECEIPT_DELAY_MS} ms; codes at ${OTP_RATE}/s for ` +
    `${SECONDS} s (after ${WARM_UP_SECONDS} s not counted), campaign to ${LIST}; checks at ${CHECK_RATE}/s for ` +
    `${SECONDS} s, closed loop ${CONCURRENCY} in flight for ${CLOSED_SECONDS} s each; account rate limits and ` +
    'Verify prefixLimit raised to 1,000,000',
);
// It keeps what one phase sends: the campaign and up to 5 minutes of codes beside it.
const simulator = await startSimulator([
  '--receipt-delay-ms',
  String(RECEIPT_DELAY_MS),
  '--retain',
  String(LIST + OTP_RATE * 300),
]);
const receiver = await startWebhookCounter((event) => event.status === 'Delivered' || event.status === 'Failed');
try {
  for (const name of DATABASES) {
    const results: Round[] = [];
    for (let n = 1; n <= ROUNDS; n++) {
      console.log(`${name}, round ${n}`);
      const body = (url: string) => round(url, simulator, receiver);
      const result = name === 'postgres' ? await withBenchPostgres('verify', body) : await onSqlite(body);
      printRound(result, name === 'postgres');
      results.push(result);
    }
    printMedians(name, results);
  }
} finally {
  await simulator.stop();
  await receiver.close();
}
