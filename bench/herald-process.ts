/**
 * What the benches that drive a running `herald serve` over HTTP share: a fresh PostgreSQL
 * database, starting and waiting for the server, an access token, cheap requests, a steady
 * stream of passcodes, the peak RSS and CPU time of processes, and a webhook receiver.
 */
import { randomBytes } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { Agent, createServer, request } from 'node:http';
import pg from 'pg';

/** The machine a bench ran on: its cores, memory and Node. */
export function machine(): string {
  const gib = Math.round(totalmem() / 2 ** 30);
  return `machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${gib} GiB; node ${process.version}`;
}

/** One ENCRYPTION_KEY for every process of a run (PostgreSQL requires it; they must share it). */
export const BENCH_ENCRYPTION_KEY = process.env.ENCRYPTION_KEY ?? randomBytes(32).toString('hex');

/**
 * Creates the database named in `url` and one more per suffix (`<name>_<suffix>`), dropped
 * first if they exist, runs `body`, and drops them all.
 */
export async function withFreshPostgres<T>(url: string, suffixes: string[], body: () => Promise<T>): Promise<T> {
  const name = new URL(url).pathname.slice(1);
  if (!/^[a-z_][a-z0-9_]*$/.test(name))
    throw new Error(`DATABASE_URL must name a database to create (lower case, digits, _), got "${name}"`);
  const names = [name, ...suffixes.map((suffix) => `${name}_${suffix}`)];
  const admin = new pg.Client({ connectionString: Object.assign(new URL(url), { pathname: '/postgres' }).toString() });
  await admin.connect();
  const drop = async () => {
    for (const each of names) await admin.query(`drop database if exists ${each} with (force)`);
  };
  await drop();
  for (const each of names) await admin.query(`create database ${each}`);
  try {
    return await body();
  } finally {
    await drop();
    await admin.end();
  }
}

/** The PostgreSQL server the benches that make their own databases use. */
const BENCH_POSTGRES_URL = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A PostgreSQL database of the bench's own (`herald_bench_<name>_<pid>`) for `body`: created, then dropped. */
export function withBenchPostgres<T>(name: string, body: (url: string) => Promise<T>): Promise<T> {
  const url = new URL(BENCH_POSTGRES_URL);
  url.pathname = `/herald_bench_${name}_${process.pid}`;
  return withFreshPostgres(url.toString(), [], () => body(url.toString()));
}

/** Runs `body` on a fresh SQLite file, then on a fresh PostgreSQL database; both removed after. */
export async function onEachDatabase(name: string, body: (url: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), `herald-bench-${name}-`));
  try {
    await body(`sqlite:${join(dir, 'herald.db')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  await withBenchPostgres(name, body);
}

/** Resolves once the server at `base` answers /healthz. */
export async function waitForHealth(base: string): Promise<void> {
  for (;;) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The JSON and bearer headers of an account's requests, with a token from POST /token. */
export async function authorizedHeaders(
  base: string,
  account: { user_name: string; privateToken: string },
  password: string,
): Promise<Record<string, string>> {
  const response = await fetch(`${base}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      userName: account.user_name,
      password,
      privateToken: account.privateToken,
      validity: 'Default',
    }),
  });
  const { access_token } = (await response.json()) as { access_token: string };
  return { 'content-type': 'application/json', authorization: `Bearer ${access_token}` };
}

/**
 * A request with node:http on kept-alive connections: the load generator shares the machine's
 * two cores with what it measures, and fetch cost it about twice the CPU.
 */
function send(
  agent: Agent,
  method: 'GET' | 'POST',
  url: string,
  headers: Record<string, string>,
  body: Buffer | string = '',
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method, agent, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export function post(
  agent: Agent,
  url: string,
  headers: Record<string, string>,
  body: Buffer | string,
): Promise<{ status: number; text: string }> {
  return send(agent, 'POST', url, headers, body);
}

export function get(agent: Agent, url: string): Promise<{ status: number; text: string }> {
  return send(agent, 'GET', url, {});
}

export function peakRssMiB(pid: number): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match![1]) / 1024;
}

const CLOCK_TICKS_PER_SECOND = 100;

/**
 * CPU seconds the processes have used (user + system), from /proc, with their children's that
 * they have waited for: PostgreSQL's postmaster gathers the time of the backends that ended.
 */
export function cpuSeconds(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    } catch {
      // ended since it was listed: its time is its parent's now
    }
  }
  return ticks / CLOCK_TICKS_PER_SECOND;
}

/** Every PostgreSQL process on the machine (postmaster, backends, background workers). */
export function postgresPids(): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres';
      } catch {
        return false;
      }
    })
    .map(Number);
}

const HERALD = new URL('../bin/herald', import.meta.url).pathname;

/** BENCH_CPU_PROF: a folder where each of Herald's processes writes its CPU profiles (one a thread). */
const CPU_PROF = process.env.BENCH_CPU_PROF;

/**
 * `herald serve` as deployed on `url`, in `role` (one process: API and workers, by default), the
 * bench's port and webhooks allowed. The `index`-th process of a bench has its own WORKER_PORT
 * (each worker process has a probes-and-metrics listener).
 */
export function startHeraldServe(
  url: string,
  port: number,
  env: NodeJS.ProcessEnv,
  role = 'all',
  index = 0,
): ChildProcess {
  return spawn(HERALD, ['serve', '--role', role], {
    env: {
      ...process.env,
      DATABASE_URL: url,
      PORT: String(port),
      WORKER_PORT: String(port + 1 + index),
      LOG_LEVEL: 'warn',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      ENCRYPTION_KEY: BENCH_ENCRYPTION_KEY,
      ...(CPU_PROF ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${CPU_PROF}` } : {}),
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

/**
 * Herald as deployed on `url`: one `herald serve` on SQLite; on PostgreSQL a process for each
 * of BENCH_ROLES (`api,worker` by default).
 */
export function startHeraldRoles(url: string, port: number, env: NodeJS.ProcessEnv): ChildProcess[] {
  const roles = url.startsWith('postgres') ? (process.env.BENCH_ROLES ?? 'api,worker').split(',') : ['all'];
  return roles.map((role, i) => startHeraldServe(url, port, env, role, i));
}

/**
 * Sends SIGTERM and resolves once the process has exited (at once if it has); one still running
 * 30 s later is killed, so a wedged process cannot hold up the bench.
 */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const wedged = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(wedged);
}

/** One request a load generator sends: to `path` on the server, and the status it must answer. */
export interface BenchRequest {
  method?: 'GET' | 'POST';
  path: string;
  body?: string;
  status: number;
  /** What the stream notes the request's send time under (a passcode's recipient); none: not noted. */
  key?: string;
}

export interface SteadyRun {
  /** When each request with a key was sent (epoch ms), by its key. */
  sentTo: Map<string, number>;
  /** Each request's time to its answer, ms. */
  latencies: number[];
  stop: () => Promise<void>;
}

function answeredAs(request: BenchRequest, answer: { status: number; text: string }): void {
  if (answer.status !== request.status)
    throw new Error(`${request.method ?? 'POST'} ${request.path} answered ${answer.status}: ${answer.text}`);
}

/**
 * `request(i)` at a steady `rate` a second until stopped, each due by the clock, not after the
 * last answer (an open loop); remembers when each keyed request was sent and how long each
 * took, and hands each answer to `answered` with its send time.
 */
export function steadyStream(
  base: string,
  headers: Record<string, string>,
  rate: number,
  request: (i: number) => BenchRequest,
  answered: (text: string, sentAt: number) => void = () => {},
): SteadyRun {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const sentTo = new Map<string, number>();
  const latencies: number[] = [];
  const pending = new Set<Promise<void>>();
  let stopped = false;
  let failure: unknown;
  const loop = (async () => {
    const started = performance.now();
    for (let i = 0; !stopped && failure === undefined; i++) {
      const due = started + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const sentAt = Date.now();
      const begun = performance.now();
      const each = request(i);
      if (each.key !== undefined) sentTo.set(each.key, sentAt);
      const one = send(agent, each.method ?? 'POST', `${base}${each.path}`, headers, each.body).then((answer) => {
        answeredAs(each, answer);
        latencies.push(performance.now() - begun);
        answered(answer.text, sentAt);
      });
      pending.add(one);
      // The first failure ends the stream, and stop() throws it: a rejection left unhandled
      // until then would end this process, its server and simulator left running.
      void one.catch((error: unknown) => {
        failure ??= error;
      });
      void one.finally(() => pending.delete(one)).catch(() => {});
    }
  })();
  return {
    sentTo,
    latencies,
    stop: async () => {
      stopped = true;
      await loop;
      await Promise.allSettled(pending);
      agent.destroy();
      if (failure !== undefined) throw failure;
    },
  };
}

export interface OtpRun extends SteadyRun {
  queueIds: Map<string, number>;
}

/** POST /sms/single at a steady `rate` a second until stopped (steadyStream), one request a recipient. */
export function otpStream(
  base: string,
  headers: Record<string, string>,
  webhookUrl: string,
  rate: number,
  recipient: (i: number) => string,
): OtpRun {
  const queueIds = new Map<string, number>();
  const run = steadyStream(
    base,
    headers,
    rate,
    (i) => {
      const to = recipient(i);
      const body = JSON.stringify({
        recipient: to,
        senderName: 'HERALD',
        body: `Your code is ${100000 + i}`,
        webHookUrl: webhookUrl,
      });
      return { path: '/sms/single', body, status: 202, key: to };
    },
    (text, sentAt) => queueIds.set(JSON.parse(text).data.QueueId, sentAt),
  );
  return { ...run, queueIds };
}

/**
 * A closed loop: `concurrency` requests in flight for `seconds`, each sent as the one before it
 * on its connection answers. Answers how many were answered, and how many a second; `answered`
 * sees each answer.
 */
export async function closedLoop(
  base: string,
  headers: Record<string, string>,
  concurrency: number,
  seconds: number,
  request: () => BenchRequest,
  answered: (text: string) => void = () => {},
): Promise<{ count: number; perSecond: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  let count = 0;
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const each = request();
        const answer = await send(agent, each.method ?? 'POST', `${base}${each.path}`, headers, each.body);
        answeredAs(each, answer);
        answered(answer.text);
        count++;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  return { count, perSecond: count / elapsed };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The value below which a share `q` of the sorted values lie. */
export const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

/**
 * A webhook receiver that counts the events of the posts it takes that `counts` picks (a
 * message's final status), and notes when the last post arrived. A GET is one event, its
 * query's parameters (how Kannel's dlr-url reports).
 */
export async function startWebhookCounter(
  counts: (event: Record<string, unknown>) => boolean,
): Promise<{ url: string; counted: () => number; lastAt: () => number; close: () => Promise<void> }> {
  let counted = 0;
  let lastAt = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const events =
        req.method === 'GET'
          ? [Object.fromEntries(new URL(req.url!, 'http://receiver').searchParams)]
          : (JSON.parse(Buffer.concat(chunks).toString()) as { data: Array<Record<string, unknown>> }).data;
      counted += events.filter(counts).length;
      lastAt = Date.now();
      res.writeHead(204).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    counted: () => counted,
    lastAt: () => lastAt,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
