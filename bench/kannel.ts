/**
 * `/sms/single` against Kannel 1.4.5 (Debian's `kannel`: /usr/sbin/bearerbox and smsbox), the
 * gateway whose pace issue 34 sets Herald's targets by. Every system sends to its own
 * `herald sim smsc` answering and receipting each submit at once, over one transceiver bind of
 * up to 100 outstanding submits, and reports delivery to a receiver in this process.
 *
 *   npm run bench:kannel
 *   BENCH_MESSAGES=2000 BENCH_ROUNDS=1 BENCH_OPEN_SECONDS=5 npm run bench:kannel   # a short check
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/herald_bench_kannel npm run bench:kannel
 *   BENCH_PORT=18900 npm run bench:kannel          # beside another run (default 18800, 5 ports)
 *   BENCH_BATCHES=0 npm run bench:kannel           # without shape 3 (BENCH_OPEN_SECONDS=0: without shape 2)
 *   BENCH_ROUNDS=0 npm run bench:kannel            # without shape 1
 *   BENCH_DATABASES=postgres npm run bench:kannel  # Herald on one database only
 *   BENCH_CPU_PROF=/tmp/prof npm run bench:kannel   # Herald's CPU profiles there (one a process and thread)
 *
 * On PostgreSQL the database named in DATABASE_URL (by default herald_bench_kannel_<pid> on the
 * test server) is created, dropped first, for each run and dropped after it. It prints:
 *  1. BENCH_ROUNDS (3) interleaved rounds of Kannel (a durable spool store), Herald on SQLite
 *     and Herald on PostgreSQL, each sending the same BENCH_MESSAGES (20,000) one-recipient
 *     messages from a closed-loop client (50 requests in flight) with a delivery-report URL:
 *     messages/s from the first request to the simulator's last submit_sm, the ratio to Kannel
 *     in the round, the time from the last submit to the last Delivered report received, the
 *     request's p50/p99, and the CPU per message of every process: the system's own (Herald,
 *     or bearerbox + smsbox), PostgreSQL's (every postgres process on the machine, so quiet
 *     it), the simulator's and the client's (this process); then the medians, and PostgreSQL's
 *     settings that bear on commits.
 *  2. On each database, `/sms/single` open-loop at BENCH_RATE a second (1,000) for
 *     BENCH_OPEN_SECONDS (20), sent by the clock whatever the answers: the request's p50/p99.
 *  3. On each database, 20 `/sms/batch` of 1,000 recipients: messages/s from the first request
 *     to the last submit, beside a bare `smpp` client (bench/smpp-client.ts) with the same bind
 *     and window on a simulator of its own, Herald's share of it, and the CPU per message of
 *     Herald and PostgreSQL's processes over the batches.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createAccount, updateAccountSettings } from '../src/accounts/service.ts';
import { systemClock } from '../src/clock.ts';
import { migrateToLatest, openDatabase } from '../src/db/database.ts';
import { PROCEDURE_MODULES } from '../src/server/procedures.ts';
import {
  authorizedHeaders,
  cpuSeconds,
  get,
  machine,
  otpStream,
  post,
  postgresPids,
  quantile,
  sleep,
  startHeraldServe,
  startWebhookCounter,
  stopProcess,
  waitForHealth,
  withBenchPostgres,
  withFreshPostgres,
} from './herald-process.ts';
import { type SimulatorProcess, startSimulator } from './sim-smsc.ts';
import { bareClientRate } from './smpp-client.ts';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const RATE = Number(process.env.BENCH_RATE ?? 1000);
const OPEN_SECONDS = Number(process.env.BENCH_OPEN_SECONDS ?? 20);
const BATCHES = Number(process.env.BENCH_BATCHES ?? 20);
const BATCH_SIZE = 1000;
const CONCURRENCY = 50;
const BINDS = 1;
const WINDOW = 100;
const WARM_UP_SECONDS = 2;
/** Herald's PORT and WORKER_PORT, then Kannel's admin, box and sendsms ports. */
const PORT = Number(process.env.BENCH_PORT ?? 18_800);
const PASSWORD = 'correct horse battery staple';
const TEXT = 'Your code is 123456. Do not share it.';
const KANNEL_TEMPLATE = new URL('./fixtures/kannel.conf.in', import.meta.url);
const PG_SETTINGS = ['synchronous_commit', 'commit_delay', 'commit_siblings', 'wal_sync_method', 'shared_buffers'];
/** Every submit answered and receipted DELIVRD at once; ids in hex, as Kannel's msg-id-type 0x03 reads them. */
const SIMULATOR_ARGS = [
  '--receipt-delay-ms',
  '0',
  '--id-format',
  'hex',
  '--retain',
  String(Math.max(100_000, MESSAGES, RATE * (OPEN_SECONDS + WARM_UP_SECONDS), BATCHES * BATCH_SIZE)),
];

type Dialect = 'sqlite' | 'postgres';
const DIALECTS = (process.env.BENCH_DATABASES ?? 'sqlite,postgres').split(',') as Dialect[];

const mobile = (n: number) => String(919_000_000_000 + n);
const median = (values: number[]) =>
  quantile(
    values.toSorted((a, b) => a - b),
    0.5,
  );

/** A gateway taking one-recipient messages over HTTP, with the processes whose CPU is its own. */
interface Gateway {
  name: string;
  pids: number[];
  /** Sends message `i` to mobile(i); resolves once the gateway has accepted it. */
  send(agent: Agent, i: number): Promise<void>;
  stop(): Promise<void>;
}

/** What a gateway, its simulator and its delivery-report receiver share for one run. */
interface Rig {
  simulator: SimulatorProcess;
  /** Counts delivered reports: Herald's Delivered events, Kannel's dlr-url calls with status 1. */
  receiver: Awaited<ReturnType<typeof startWebhookCounter>>;
}

async function withRig<T>(body: (rig: Rig) => Promise<T>): Promise<T> {
  const simulator = await startSimulator(SIMULATOR_ARGS);
  const receiver = await startWebhookCounter((e) => e.status === 'Delivered' || e.status === '1');
  try {
    return await body({ simulator, receiver });
  } finally {
    await simulator.stop();
    await receiver.close();
  }
}

/** Fills the template, its comments left out (they name the placeholders). */
function kannelConfig(run: string, smppPort: number): string {
  const values: Record<string, string> = {
    RUN: run,
    ADMIN: String(PORT + 2),
    BOXC: String(PORT + 3),
    SENDSMS: String(PORT + 4),
    SMPP: String(smppPort),
    STORE: `store-type = spool\nstore-location = "${run}/spool"`,
  };
  return readFileSync(KANNEL_TEMPLATE, 'utf8')
    .split('\n')
    .filter((line) => !line.startsWith('#'))
    .join('\n')
    .replace(/@([A-Z]+)@/g, (_, name: string) => values[name]);
}

/** Polls `ready` every 100 ms until it holds; throws if `child` exits first or 30 s pass. */
async function until(child: ChildProcess, what: string, ready: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} exited before it was ready`);
    if (Date.now() > deadline) throw new Error(`${what} was not ready within 30 s`);
    if (await ready().catch(() => false)) return;
    await sleep(100);
  }
}

/** bearerbox bound to the simulator, then smsbox taking sendsms; the config and spool in a run folder. */
async function startKannel({ simulator, receiver }: Rig): Promise<Gateway> {
  const run = mkdtempSync(join(tmpdir(), 'herald-bench-kannel-'));
  mkdirSync(join(run, 'spool'));
  const config = join(run, 'kannel.conf');
  writeFileSync(config, kannelConfig(run, simulator.port));
  // -v 4: only a panic on the console (a stop is logged as an error); the config's log files
  // take warnings.
  const box = (command: string) => spawn(command, ['-v', '4', config], { stdio: ['ignore', 'ignore', 'inherit'] });
  const bearerbox = box('/usr/sbin/bearerbox');
  const boxes = [bearerbox];
  const stop = async () => {
    for (const child of boxes.reverse()) await stopProcess(child);
    rmSync(run, { recursive: true, force: true });
  };
  const admin = `http://127.0.0.1:${PORT + 2}`;
  const sendsms = `http://127.0.0.1:${PORT + 4}/cgi-bin/sendsms`;
  try {
    await until(bearerbox, 'bearerbox', async () =>
      /\(online /.test(await (await fetch(`${admin}/status.txt?password=adm`)).text()),
    );
    const smsbox = box('/usr/sbin/smsbox');
    boxes.push(smsbox);
    // Without credentials sendsms answers 403 once smsbox listens.
    await until(smsbox, 'smsbox', async () => (await fetch(sendsms)).status === 403);
  } catch (error) {
    await stop();
    throw error;
  }
  const dlrUrl = encodeURIComponent(`${receiver.url}?status=%d`);
  const query = `username=u&password=p&from=HERALD&text=${encodeURIComponent(TEXT)}&dlr-mask=3&dlr-url=${dlrUrl}`;
  return {
    name: 'Kannel, spool store',
    pids: boxes.map((child) => child.pid!),
    async send(agent, i) {
      const { status, text } = await get(agent, `${sendsms}?${query}&to=${mobile(i)}`);
      if (status !== 202) throw new Error(`sendsms answered ${status}: ${text}`);
    },
    stop,
  };
}

/**
 * Runs `body` with a fresh database of the dialect: a file in a temporary folder, or the
 * PostgreSQL database DATABASE_URL names (herald_bench_kannel_<pid> by default).
 */
async function withDatabase<T>(dialect: Dialect, body: (url: string) => Promise<T>): Promise<T> {
  if (dialect === 'postgres') {
    const named = process.env.DATABASE_URL;
    return named ? withFreshPostgres(named, [], () => body(named)) : withBenchPostgres('kannel', body);
  }
  const dir = mkdtempSync(join(tmpdir(), 'herald-bench-kannel-'));
  try {
    return await body(`sqlite:${join(dir, 'herald.db')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface Herald extends Gateway {
  base: string;
  headers: Record<string, string>;
}

/** `herald serve` on `url` with an account whose SMS rate limit is out of the way, bound to the rig's simulator. */
async function startHerald(url: string, { simulator, receiver }: Rig): Promise<Herald> {
  const database = openDatabase(url, { poolSize: 1, procedures: PROCEDURE_MODULES });
  let account: Awaited<ReturnType<typeof createAccount>>;
  try {
    await migrateToLatest(database);
    account = await createAccount(database.db, systemClock, {
      userName: `bench-${Date.now()}@example.com`,
      password: PASSWORD,
    });
    await updateAccountSettings(database.db, systemClock, account.id, { rateLimits: { sms: 1_000_000 } });
  } finally {
    await database.close();
  }
  const server = startHeraldServe(url, PORT, {
    SMS_TRANSPORT: `smpp://bench:bench@127.0.0.1:${simulator.port}?binds=${BINDS}&window=${WINDOW}`,
  });
  const base = `http://127.0.0.1:${PORT}`;
  try {
    await waitForHealth(base);
    const headers = await authorizedHeaders(base, account, PASSWORD);
    return {
      name: `Herald on ${url.startsWith('sqlite') ? 'SQLite' : 'PostgreSQL'}`,
      pids: [server.pid!],
      base,
      headers,
      async send(agent, i) {
        const body = JSON.stringify({
          recipient: mobile(i),
          senderName: 'HERALD',
          body: TEXT,
          webHookUrl: receiver.url,
        });
        const { status, text } = await post(agent, `${base}/sms/single`, headers, body);
        if (status !== 202) throw new Error(`/sms/single answered ${status}: ${text}`);
      },
      stop: () => stopProcess(server),
    };
  } catch (error) {
    await stopProcess(server);
    throw error;
  }
}

/** Resolves with the time (epoch ms) the last of the first `count` submits reached the simulator. */
async function lastSubmit(simulator: SimulatorProcess, count: number): Promise<number> {
  const deadline = Date.now() + 120_000;
  while ((await simulator.stats()).submits.accepted < count) {
    if (Date.now() > deadline) throw new Error(`the simulator did not get ${count} submits within 120 s`);
    await sleep(50);
  }
  const arrivals = await simulator.arrivals();
  if (arrivals.size !== count) throw new Error(`${arrivals.size} recipients reached the simulator, not ${count}`);
  let last = 0;
  for (const at of arrivals.values()) last = Math.max(last, at);
  return last;
}

interface Cpu {
  own: number;
  postgres: number;
  simulator: number;
  client: number;
}

/** CPU ms a message of one process between two readings, over `count` messages. */
const cpuPerMessage = (before: Cpu, after: Cpu, count: number) => (key: keyof Cpu) =>
  ((after[key] - before[key]) * 1000) / count;

function cpuNow(gateway: Gateway, simulator: SimulatorProcess): Cpu {
  const { user, system } = process.cpuUsage();
  return {
    own: cpuSeconds(gateway.pids),
    postgres: cpuSeconds(postgresPids()),
    simulator: cpuSeconds([simulator.pid]),
    client: (user + system) / 1e6,
  };
}

interface Shape1 {
  name: string;
  perSecond: number;
  /** From the last submit to the last Delivered report, s; null if not all came within 120 s. */
  reportsAfter: number | null;
  reports: number;
  p50: number;
  p99: number;
  /** CPU ms a message, by process; PostgreSQL's counted for Herald on PostgreSQL only. */
  cpu: Cpu;
}

/** MESSAGES one-recipient messages, CONCURRENCY requests in flight, until every Delivered report is in. */
async function closedLoop(gateway: Gateway, { simulator, receiver }: Rig, postgres: boolean): Promise<Shape1> {
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const latencies: number[] = [];
  let next = 0;
  const before = cpuNow(gateway, simulator);
  const startedAt = Date.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < MESSAGES) {
        const i = next++;
        const begun = performance.now();
        await gateway.send(agent, i);
        latencies.push(performance.now() - begun);
      }
    }),
  );
  agent.destroy();
  const last = await lastSubmit(simulator, MESSAGES);
  const deadline = last + 120_000;
  while (receiver.counted() < MESSAGES && Date.now() < deadline) await sleep(50);
  const after = cpuNow(gateway, simulator);
  const perMessage = cpuPerMessage(before, after, MESSAGES);
  latencies.sort((a, b) => a - b);
  return {
    name: gateway.name,
    perSecond: MESSAGES / ((last - startedAt) / 1000),
    reportsAfter: receiver.counted() >= MESSAGES ? (receiver.lastAt() - last) / 1000 : null,
    reports: receiver.counted(),
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    cpu: {
      own: perMessage('own'),
      postgres: postgres ? perMessage('postgres') : Number.NaN,
      simulator: perMessage('simulator'),
      client: perMessage('client'),
    },
  };
}

const ms = (value: number) => (Number.isNaN(value) ? '-' : value.toFixed(2));

function printShape1(result: Shape1, kannel: number): void {
  const reports =
    result.reportsAfter === null
      ? `only ${result.reports} of ${MESSAGES} Delivered`
      : `last Delivered +${result.reportsAfter.toFixed(1)} s`;
  const { own, postgres, simulator, client } = result.cpu;
  console.log(
    `  ${result.name.padEnd(24)}${result.perSecond.toFixed(0).padStart(6)}/s  ` +
      `×${(result.perSecond / kannel).toFixed(2)}  ` +
      `${reports}  p50/p99 ${result.p50.toFixed(0)}/${result.p99.toFixed(0)} ms  ` +
      `CPU ms/msg: own ${ms(own)}, postgres ${ms(postgres)}, simulator ${ms(simulator)}, client ${ms(client)}`,
  );
}

let postgresSettings: string | undefined;

async function readPostgresSettings(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string; setting: string }>(
      'select name, current_setting(name) as setting from pg_settings where name = any($1) order by name',
      [PG_SETTINGS],
    );
    return rows.map((row) => `${row.name}=${row.setting}`).join(', ');
  } finally {
    await client.end();
  }
}

/** Shape 1 for Herald on one database. */
function heraldRound(dialect: Dialect): Promise<Shape1> {
  return withDatabase(dialect, async (url) => {
    if (dialect === 'postgres') postgresSettings ??= await readPostgresSettings(url);
    return withRig(async (rig) => {
      const herald = await startHerald(url, rig);
      try {
        return await closedLoop(herald, rig, dialect === 'postgres');
      } finally {
        await herald.stop();
      }
    });
  });
}

function kannelRound(): Promise<Shape1> {
  return withRig(async (rig) => {
    const kannel = await startKannel(rig);
    try {
      return await closedLoop(kannel, rig, false);
    } finally {
      await kannel.stop();
    }
  });
}

async function shape1(): Promise<void> {
  console.log(
    `1. ${MESSAGES} one-recipient messages, ${CONCURRENCY} requests in flight, ${BINDS} bind × window ${WINDOW}, ` +
      'receipts at once; messages/s from the first request to the last submit_sm',
  );
  const results: Shape1[][] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    console.log(`round ${round}`);
    const kannel = await kannelRound();
    printShape1(kannel, kannel.perSecond);
    const row = [kannel];
    for (const dialect of DIALECTS) {
      const herald = await heraldRound(dialect);
      printShape1(herald, kannel.perSecond);
      row.push(herald);
    }
    results.push(row);
  }
  console.log(`medians of ${ROUNDS} rounds`);
  for (let i = 0; i < results[0].length; i++) {
    const runs = results.map((row) => row[i]);
    const ratios = results.map((row) => row[i].perSecond / row[0].perSecond);
    const perSecond = median(runs.map((r) => r.perSecond));
    console.log(
      `  ${runs[0].name.padEnd(24)}${perSecond.toFixed(0).padStart(6)}/s  ` +
        `×${median(ratios).toFixed(2)}  p99 ${median(runs.map((r) => r.p99)).toFixed(0)} ms  ` +
        `own CPU ${median(runs.map((r) => r.cpu.own)).toFixed(2)} ms/msg`,
    );
  }
  if (postgresSettings) console.log(`PostgreSQL: ${postgresSettings}`);
}

/** Shape 2: the request's p50/p99 at a steady rate, after a warm-up (V8 optimises a new process's hot paths). */
async function shape2(): Promise<void> {
  console.log(
    `2. open loop: POST /sms/single at ${RATE}/s for ${OPEN_SECONDS} s (after ${WARM_UP_SECONDS} s not counted)`,
  );
  for (const dialect of DIALECTS)
    await withDatabase(dialect, (url) =>
      withRig(async (rig) => {
        const herald = await startHerald(url, rig);
        try {
          const stream = async (seconds: number) => {
            const run = otpStream(herald.base, herald.headers, rig.receiver.url, RATE, mobile);
            await sleep(seconds * 1000);
            await run.stop();
            return run.latencies.toSorted((a, b) => a - b);
          };
          await stream(WARM_UP_SECONDS);
          const latencies = await stream(OPEN_SECONDS);
          console.log(
            `  ${herald.name.padEnd(24)}p50/p99 ` +
              `${quantile(latencies, 0.5).toFixed(1)}/${quantile(latencies, 0.99).toFixed(1)} ms` +
              `  (${latencies.length} requests)`,
          );
        } finally {
          await herald.stop();
        }
      }),
    );
}

/** Shape 3: BATCHES × `/sms/batch` of BATCH_SIZE against a bare client on the same bind settings. */
async function shape3(): Promise<void> {
  const total = BATCHES * BATCH_SIZE;
  console.log(
    `3. ${BATCHES} × /sms/batch of ${BATCH_SIZE}, beside a bare smpp client (${BINDS} bind × window ${WINDOW})`,
  );
  for (const dialect of DIALECTS)
    await withDatabase(dialect, (url) =>
      withRig(async (rig) => {
        const herald = await startHerald(url, rig);
        let perSecond: number;
        let cpu: string;
        try {
          const agent = new Agent({ keepAlive: true });
          const before = cpuNow(herald, rig.simulator);
          const startedAt = Date.now();
          for (let b = 0; b < BATCHES; b++) {
            const recipients = Array.from({ length: BATCH_SIZE }, (_, k) => ({ mobileNo: mobile(b * BATCH_SIZE + k) }));
            const body = JSON.stringify({ recipients, senderName: 'HERALD', body: TEXT, webHookUrl: rig.receiver.url });
            const { status, text } = await post(agent, `${herald.base}/sms/batch`, herald.headers, body);
            if (status !== 202) throw new Error(`/sms/batch answered ${status}: ${text}`);
          }
          agent.destroy();
          perSecond = (total / ((await lastSubmit(rig.simulator, total)) - startedAt)) * 1000;
          const perMessage = cpuPerMessage(before, cpuNow(herald, rig.simulator), total);
          const postgres = dialect === 'postgres' ? perMessage('postgres') : Number.NaN;
          cpu = `CPU ms/msg: own ${ms(perMessage('own'))}, postgres ${ms(postgres)}`;
        } finally {
          await herald.stop();
        }
        const simulator = await startSimulator(SIMULATOR_ARGS);
        const bare = await bareClientRate(simulator.port, total, BINDS, WINDOW).finally(() => simulator.stop());
        console.log(
          `  ${herald.name.padEnd(24)}${perSecond.toFixed(0).padStart(6)}/s  bare client ${bare.toFixed(0)}/s  ` +
            `Herald ${(perSecond / bare).toFixed(2)} of it  ${cpu}`,
        );
      }),
    );
}

console.log(machine());
if (ROUNDS > 0) await shape1();
if (OPEN_SECONDS > 0) await shape2();
if (BATCHES > 0) await shape3();
