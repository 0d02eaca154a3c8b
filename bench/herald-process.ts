/**
 * What the benches that drive a running `herald serve` over HTTP share: a fresh PostgreSQL
 * database, waiting for the server, an access token, a cheap POST, the peak RSS and a webhook
 * receiver.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { createServer, request, type Agent } from 'node:http';
import pg from 'pg';

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
 * POSTs with node:http on kept-alive connections: the load generator shares the machine's
 * two cores with what it measures, and fetch cost it about twice the CPU.
 */
export function post(
  agent: Agent,
  url: string,
  headers: Record<string, string>,
  body: Buffer | string,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', agent, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } },
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

export function peakRssMiB(pid: number): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match![1]) / 1024;
}

/**
 * A webhook receiver that counts the events of the posts it takes that `counts` picks (a
 * message's final status), and notes when the last post arrived.
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
      counted += (JSON.parse(Buffer.concat(chunks).toString()) as { data: Array<Record<string, unknown>> }).data.filter(
        counts,
      ).length;
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
