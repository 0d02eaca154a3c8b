/**
 * A campaign over one SMSC connection against the same campaign split over two by the routing
 * table (docs/sms.md, "Routes over several SMSCs"), each round on a fresh database, the two
 * shapes in turn:
 *  - one: SMS_TRANSPORT to simulator A with 2 binds and a window of 50;
 *  - two: SMS_TRANSPORT unset, connections `a` (simulator A) and `b` (simulator B) of 1 bind and a
 *    window of 50 each, the list's numbers split half and half by prefix.
 * The same total binds × window, and two simulator processes running in both (B idle in one),
 * each numbering its messages from its own start. It prints, per round and database, messages/s
 * from the request to the last submit_sm's arrival at either simulator, and the ratio two / one;
 * then the medians.
 *
 *   npm run bench:sms-routes                                              # SQLite, then PostgreSQL
 *   BENCH_DATABASES=sqlite BENCH_ROUNDS=1 BENCH_LIST=20000 npm run bench:sms-routes
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAccount, updateAccountSettings } from '../src/accounts/service.ts';
import { systemClock } from '../src/clock.ts';
import { migrateToLatest, openDatabase } from '../src/db/database.ts';
import { Keyring, keyFromHex } from '../src/sealed.ts';
import { PROCEDURE_MODULES } from '../src/server/procedures.ts';
import { addConnection } from '../src/sms/routing/connections.ts';
import { replaceRoutes } from '../src/sms/routing/table.ts';
import {
  authorizedHeaders,
  BENCH_ENCRYPTION_KEY,
  machine,
  post,
  sleep,
  startHeraldServe,
  stopProcess,
  waitForHealth,
  withBenchPostgres,
} from './herald-process.ts';
import { mobileContact, seedList } from './seed.ts';
import { startSimulator, type SimulatorProcess } from './sim-smsc.ts';

const LIST = Number(process.env.BENCH_LIST ?? 100_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DATABASES = (process.env.BENCH_DATABASES ?? 'sqlite,postgres').split(',');
const RECEIPT_DELAY_MS = 1000;
const WINDOW = 50;
const PORT = Number(process.env.BENCH_PORT ?? 18_800);

type Shape = 'one' | 'two';

/** The list's numbers, 919000000001 to 919000100000: 9190000<d>xxxx, the first half under d = 0–4. */
const mobile = (n: number) => String(919_000_000_000 + n);
/** The prefixes of the list's first half, which the two-connection shape sends over `a`. */
const FIRST_HALF = Array.from({ length: 5 }, (_, d) => `9190000${d}`);

/** Contact `n`'s number: the list's numbers spread over 919000000001–919000099999 whatever its size. */
const numberOf = (n: number) => mobile(Math.floor(((n - 1) * 99_999) / Math.max(1, LIST - 1)) + 1);

/** One campaign to the list in `shape` on a fresh database at `url`: messages/s, request to last submit. */
async function campaign(url: string, shape: Shape, simulators: [SimulatorProcess, SimulatorProcess]): Promise<number> {
  const [a, b] = simulators;
  const database = openDatabase(url, { poolSize: 2, procedures: PROCEDURE_MODULES });
  await migrateToLatest(database);
  const password = 'correct horse battery staple';
  const account = await createAccount(database.db, systemClock, { userName: `bench-${shape}@example.com`, password });
  await updateAccountSettings(database.db, systemClock, account.id, { rateLimits: { sms: 1_000_000 } });
  const listId = await seedList(database, account.id, LIST, (n) => mobileContact(numberOf(n)));
  const smsc = (simulator: SimulatorProcess, binds: number) =>
    `smpp://bench:bench@127.0.0.1:${simulator.port}?binds=${binds}&window=${WINDOW}`;
  const env: NodeJS.ProcessEnv = { SMS_TRANSPORT: shape === 'one' ? smsc(a, 2) : '' };
  if (shape === 'two') {
    const keyring = new Keyring(keyFromHex(BENCH_ENCRYPTION_KEY)!);
    await addConnection(database.db, keyring, systemClock, { name: 'a', url: smsc(a, 1) });
    await addConnection(database.db, keyring, systemClock, { name: 'b', url: smsc(b, 1) });
    await replaceRoutes(database.db, [
      ...FIRST_HALF.map((prefix) => ({ prefix, smsc: ['a'] })),
      { prefix: '', smsc: ['b'] },
    ]);
  }
  await Promise.all(simulators.map((simulator) => simulator.reset()));
  const server = startHeraldServe(url, PORT, env);
  const base = `http://127.0.0.1:${PORT}`;
  try {
    await waitForHealth(base);
    const headers = await authorizedHeaders(base, account, password);
    const requested = Date.now();
    const body = JSON.stringify({ listId: [listId], senderName: 'HERALD', body: 'Our sale starts today.' });
    const accepted = await post(new Agent(), `${base}/sms/batch`, headers, body);
    if (accepted.status !== 202) throw new Error(`/sms/batch answered ${accepted.status}: ${accepted.text}`);
    const taken = async () =>
      (await Promise.all(simulators.map(async (simulator) => (await simulator.stats()).submits.accepted))).reduce(
        (sum, n) => sum + n,
        0,
      );
    const deadline = Date.now() + 600_000;
    while ((await taken()) < LIST) {
      if (Date.now() > deadline) throw new Error(`only ${await taken()} of ${LIST} submitted within 10 minutes`);
      await sleep(100);
    }
    const arrivals = await Promise.all(simulators.map((simulator) => simulator.arrivals()));
    const last = Math.max(...arrivals.flatMap((each) => [...each.values()]));
    const split = arrivals.map((each) => each.size).join(' + ');
    const rate = LIST / ((last - requested) / 1000);
    console.log(`  ${shape} connection${shape === 'one' ? ' ' : 's'}: ${rate.toFixed(0)} messages/s (${split})`);
    return rate;
  } finally {
    await stopProcess(server);
    await database.close();
  }
}

const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)];

async function onDatabase(name: string, simulators: [SimulatorProcess, SimulatorProcess]): Promise<void> {
  const ratios: number[] = [];
  const rates: Record<Shape, number[]> = { one: [], two: [] };
  for (let round = 1; round <= ROUNDS; round++) {
    console.log(`${name}, round ${round}: ${LIST} recipients`);
    for (const shape of ['one', 'two'] as const) {
      const rate =
        name === 'postgres'
          ? await withBenchPostgres('sms_routes', (url) => campaign(url, shape, simulators))
          : await onSqlite((url) => campaign(url, shape, simulators));
      rates[shape].push(rate);
    }
    ratios.push(rates.two.at(-1)! / rates.one.at(-1)!);
    console.log(`  two / one: ${ratios.at(-1)!.toFixed(2)}`);
  }
  console.log(
    `${name}: medians of ${ROUNDS}: one ${median(rates.one).toFixed(0)}/s, two ${median(rates.two).toFixed(0)}/s, ` +
      `two / one ${median(ratios).toFixed(2)} (target ≥ 0.9)`,
  );
}

async function onSqlite<T>(body: (url: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-bench-sms-routes-'));
  try {
    return await body(`sqlite:${join(dir, 'herald.db')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(`${machine()}; binds × window 2 × ${WINDOW} on both shapes; receipts after ${RECEIPT_DELAY_MS} ms`);
const args = ['--receipt-delay-ms', String(RECEIPT_DELAY_MS), '--retain', String(LIST * 2)];
// Two operators' SMSCs number their messages each their own way: B's ids start far from A's.
const simulators = [await startSimulator(args), await startSimulator([...args, '--first-id', '500000000'])] as [
  SimulatorProcess,
  SimulatorProcess,
];
try {
  for (const name of DATABASES) await onDatabase(name, simulators);
} finally {
  await Promise.all(simulators.map((simulator) => simulator.stop()));
}
