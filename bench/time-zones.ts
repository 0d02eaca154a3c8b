/**
 * deliverInRecipientTimeZone (docs/sms.md, "Each recipient's own time") as `herald serve`
 * runs it: a batch SMS to a list of BENCH_LIST (1,000,000) contacts spread over 30 zones by
 * their `timeZone` property, at a time every one of those zones has still to reach (so every
 * recipient is held), against the same send without zones (every recipient sent, through the
 * sandbox). It prints, for each: the expansion (request → the send expanded), and the first
 * pass (request → every recipient held, or the send Completed), with Herald's peak RSS, on
 * each of BENCH_DATABASES (sqlite,postgres).
 *
 *   npm run bench:time-zones
 *   BENCH_DATABASES=sqlite BENCH_LIST=100000 npm run bench:time-zones
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
  machine,
  peakRssMiB,
  post,
  sleep,
  startHeraldServe,
  stopProcess,
  waitForHealth,
  withBenchPostgres,
} from './herald-process.ts';
import { mobileContact, seedList } from './seed.ts';

const LIST = Number(process.env.BENCH_LIST ?? 1_000_000);
const DATABASES = (process.env.BENCH_DATABASES ?? 'sqlite,postgres').split(',');
const PORT = Number(process.env.BENCH_PORT ?? 18970);
const PASSWORD = 'bench-password-1';
const PROPERTY_ID = '00000000-0000-4000-8000-0000000007a0';

/** 30 zones from UTC−10:00 to UTC+13:00: none reaches a time 13.5 hours ahead of UTC's clock before it is due. */
const ZONES = [
  'Pacific/Honolulu',
  'America/Anchorage',
  'America/Los_Angeles',
  'America/Denver',
  'America/Chicago',
  'America/New_York',
  'America/Halifax',
  'America/Sao_Paulo',
  'America/Argentina/Buenos_Aires',
  'Atlantic/South_Georgia',
  'Atlantic/Azores',
  'Europe/London',
  'Europe/Paris',
  'Europe/Athens',
  'Europe/Moscow',
  'Asia/Tehran',
  'Asia/Dubai',
  'Asia/Karachi',
  'Asia/Kolkata',
  'Asia/Kathmandu',
  'Asia/Dhaka',
  'Asia/Bangkok',
  'Asia/Shanghai',
  'Asia/Tokyo',
  'Australia/Adelaide',
  'Australia/Sydney',
  'Pacific/Noumea',
  'Pacific/Fiji',
  'Pacific/Auckland',
  'Pacific/Tongatapu',
];

const listMobile = (n: number) => `9198${String(n).padStart(8, '0')}`;

/** The time 13.5 hours ahead of UTC's clock, without an offset: past at UTC+14:00, ahead in every zone of ZONES. */
const aheadOfEveryZone = () => new Date(Date.now() + 13.5 * 3_600_000).toISOString().slice(0, 19);

async function until(what: string, seconds: number, done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${seconds} s`);
    await sleep(250);
  }
}

async function timed(database: Database, base: string, headers: Record<string, string>, body: object) {
  const begun = performance.now();
  const answer = await post(new Agent(), `${base}/sms/batch`, headers, JSON.stringify(body));
  if (answer.status !== 202) throw new Error(`/sms/batch answered ${answer.status}: ${answer.text}`);
  const sendId = JSON.parse(answer.text).data.QueueId as string;
  const send = () => database.db.selectFrom('sends').selectAll().where('id', '=', sendId).executeTakeFirstOrThrow();
  await until('the expansion', 1800, async () => Boolean((await send()).expanded));
  const expanded = (performance.now() - begun) / 1000;
  await until('the first pass', 3600, async () => {
    if ((await send()).status === 'Completed') return true;
    const { held } = await database.db
      .selectFrom('send_recipients')
      .select((eb) => eb.fn.countAll<number>().as('held'))
      .where('send_id', '=', sendId)
      .where('due_at', 'is not', null)
      .executeTakeFirstOrThrow();
    return Number(held) === LIST;
  });
  return { expanded, pass: (performance.now() - begun) / 1000 };
}

async function onDatabase(url: string): Promise<void> {
  const database = openDatabase(url, { poolSize: 2, procedures: PROCEDURE_MODULES });
  let server: ReturnType<typeof startHeraldServe> | undefined;
  try {
    await migrateToLatest(database);
    const account = await createAccount(database.db, systemClock, {
      userName: `bench-time-zones-${Date.now()}@example.com`,
      password: PASSWORD,
    });
    await updateAccountSettings(database.db, systemClock, account.id, {
      rateLimits: { sms: 1_000_000, account: 1_000_000 },
    });
    await database.db
      .insertInto('contact_properties')
      .values({ id: PROPERTY_ID, account_id: account.id, name: 'timeZone', name_key: 'timezone', created_at: 0 })
      .execute();
    const listId = await seedList(database, account.id, LIST, (n) => ({
      ...mobileContact(listMobile(n)),
      properties: JSON.stringify({ [PROPERTY_ID]: ZONES[n % ZONES.length] }),
    }));
    server = startHeraldServe(url, PORT, {});
    const base = `http://127.0.0.1:${PORT}`;
    await waitForHealth(base);
    const headers = await authorizedHeaders(base, account, PASSWORD);
    const body = { listId: [listId], senderName: 'HERALD', body: 'Our sale starts today.' };
    const zoned = await timed(database, base, headers, {
      ...body,
      scheduleDateTime: aheadOfEveryZone(),
      deliverInRecipientTimeZone: true,
    });
    console.log(
      `  in 30 zones:   expanded in ${zoned.expanded.toFixed(1)} s, every recipient held ` +
        `by ${zoned.pass.toFixed(1)} s`,
    );
    const plain = await timed(database, base, headers, body);
    console.log(
      `  without zones: expanded in ${plain.expanded.toFixed(1)} s, every recipient sent ` +
        `by ${plain.pass.toFixed(1)} s; Herald's peak RSS ${peakRssMiB(server.pid!).toFixed(0)} MiB`,
    );
  } finally {
    if (server) await stopProcess(server);
    await database.close();
  }
}

console.log(machine());
console.log(`${LIST.toLocaleString('en')} recipients`);
for (const name of DATABASES) {
  console.log(`${name}:`);
  if (name === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'herald-bench-time-zones-'));
    try {
      await onDatabase(`sqlite:${join(dir, 'herald.db')}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  } else {
    await withBenchPostgres('time_zones', onDatabase);
  }
}
