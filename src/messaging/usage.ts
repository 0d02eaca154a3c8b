import { sql, type Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { badRequest } from '../errors.ts';
import { BUCKET_MS } from './rollup.ts';
import { money } from './money.ts';
import type { Channel } from './recipients.ts';

type Db = Kysely<Schema>;

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

/** Days a `GET /usage` or a daily `GET /stats` spans at most: a leap year's. */
export const MAX_DAYS = 366;
/** Days an hourly `GET /stats` spans at most: 744 points, a month's chart. */
export const MAX_HOURLY_DAYS = 31;

/**
 * A day of the account's calendar: the instant its local midnight is (epoch ms), from `YYYY-MM-DD`;
 * a 400 if there is no such day.
 */
function localMidnight(date: string, field: string, offsetMinutes: number): number {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date);
  const utc = match ? Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])) : NaN;
  if (!match || Number.isNaN(utc) || new Date(utc).toISOString().slice(0, 10) !== date) {
    throw badRequest('The date is not valid.', [{ field, message: 'must be a date YYYY-MM-DD' }]);
  }
  return utc - offsetMinutes * 60_000;
}

/**
 * A span of whole local days, `from` through `to` (both inclusive): its first instant and its day
 * count; a 400 if reversed or over `maxDays`.
 */
export function localDays(
  from: string,
  to: string,
  offsetMinutes: number,
  maxDays: number,
): { start: number; days: number } {
  const start = localMidnight(from, 'from', offsetMinutes);
  const end = localMidnight(to, 'to', offsetMinutes);
  if (end < start)
    throw badRequest('The range ends before it starts.', [{ field: 'to', message: 'must be on or after from' }]);
  const days = (end - start) / DAY_MS + 1;
  if (days > maxDays)
    throw badRequest(`The range is too long: at most ${maxDays} days.`, [
      { field: 'to', message: `must be within ${maxDays} days of from, both included` },
    ]);
  return { start, days };
}

interface PeriodCount {
  channel: Channel;
  /** The period's index from the span's first. */
  period: number;
  status: string;
  encoding: string;
  currency: string;
  messages: number;
  parts: number;
  costMicros: number;
}

/**
 * The rollup and the deltas not yet folded into it (rollup.ts) summed per local period (an hour or
 * a day: `periodMs`) of a span, status and encoding, for the account's channels. The account's
 * offset is whole quarter-hours and so are the buckets, so each bucket falls in one period: the
 * grouping is integer arithmetic on the key, and a month is a range read of at most 2,976 buckets
 * per status.
 */
async function periodCounts(
  db: Db,
  q: { accountId: string; channels: Channel[]; start: number; periods: number; periodMs: number },
): Promise<PeriodCount[]> {
  const first = q.start / BUCKET_MS;
  const per = q.periodMs / BUCKET_MS;
  const last = first + q.periods * per;
  // Cast: a number parameter may arrive as a real, whose division would not truncate.
  const { rows } = await sql<PeriodCount>`
    select channel, cast((bucket - ${first}) / ${per} as integer) as period, status, encoding, currency,
           sum(messages) as messages, sum(parts) as parts, sum(cost_micros) as "costMicros"
      from (select channel, bucket, status, encoding, currency, messages, parts, cost_micros from usage_rollup
             where account_id = ${q.accountId} and channel in (${sql.join(q.channels)})
               and bucket >= ${first} and bucket < ${last}
            union all
            select channel, bucket, status, encoding, currency, messages, parts, cost_micros from usage_deltas
             where account_id = ${q.accountId} and channel in (${sql.join(q.channels)})
               and bucket >= ${first} and bucket < ${last}) counted
     group by 1, 2, 3, 4, 5`.execute(db);
  return rows.map((row) => ({
    ...row,
    period: Number(row.period),
    messages: Number(row.messages),
    parts: Number(row.parts),
    costMicros: Number(row.costMicros),
  }));
}

/** The status words each figure of `GET /stats` counts, per channel (docs/api.md, "Sends, usage and statistics"). */
const FIGURES = {
  sms: {
    sent: ['Submitted'],
    delivered: ['Delivered'],
    failed: ['Failed'],
    refused: ['NotSent'],
    opened: [],
    clicked: [],
    unsubscribed: [],
    complaints: [],
  },
  email: {
    sent: ['Processed'],
    delivered: ['Delivered'],
    failed: ['Bounce'],
    refused: ['Dropped'],
    opened: ['Open'],
    clicked: ['Click'],
    unsubscribed: ['Unsubscribe'],
    complaints: ['Spam Report'],
  },
} as const satisfies Record<Channel, Record<string, readonly string[]>>;

type Figure = keyof (typeof FIGURES)['sms'];

/** `GET /stats`: per local hour or day of the span, every one shown, what the channel's messages reached. */
export async function readStats(
  db: Db,
  q: { accountId: string; offsetMinutes: number; channel: Channel; from: string; to: string; interval: 'hour' | 'day' },
) {
  const { start, days } = localDays(q.from, q.to, q.offsetMinutes, q.interval === 'hour' ? MAX_HOURLY_DAYS : MAX_DAYS);
  const periodMs = q.interval === 'hour' ? HOUR_MS : DAY_MS;
  const periods = (days * DAY_MS) / periodMs;
  const figureOf = new Map<string, Figure>();
  for (const [figure, words] of Object.entries(FIGURES[q.channel]))
    for (const word of words) figureOf.set(word, figure as Figure);
  const points = Array.from({ length: periods }, (_, i) => ({
    start: new Date(start + i * periodMs).toISOString(),
    sent: 0,
    delivered: 0,
    failed: 0,
    refused: 0,
    opened: 0,
    clicked: 0,
    unsubscribed: 0,
    complaints: 0,
  }));
  for (const row of await periodCounts(db, {
    accountId: q.accountId,
    channels: [q.channel],
    start,
    periods,
    periodMs,
  })) {
    const figure = figureOf.get(row.status);
    if (figure) points[row.period][figure] += row.messages;
  }
  return { channel: q.channel, interval: q.interval, from: q.from, to: q.to, points };
}

const ENCODINGS: Record<string, 'gsm7' | 'ucs2'> = { 'GSM-7': 'gsm7', 'UCS-2': 'ucs2' };

/** One day's (or the span's) usage: billed messages and parts, every status word reached, and the cost. */
function emptyUsage() {
  return {
    sms: { messages: 0, parts: { gsm7: 0, ucs2: 0 }, statuses: {} as Record<string, number> },
    email: { messages: 0, statuses: {} as Record<string, number> },
    /** Micro-units per currency, shown as `cost: [{amount, currency}]`. */
    costMicros: new Map<string, number>(),
  };
}

/** The usage as GET /usage shows it: the cost a list of money, one a currency in code order. */
function shown({ costMicros, ...usage }: ReturnType<typeof emptyUsage>) {
  const currencies = [...costMicros.keys()].sort();
  return { ...usage, cost: currencies.map((currency) => money(costMicros.get(currency)!, currency)) };
}

/**
 * `GET /usage`: per local day, the billed counts (docs/api.md, "Sends, usage and statistics"): SMS
 * messages the operator accepted (Submitted) and their parts by encoding, emails handed over
 * for sending (Processed); and every status word messages reached that day.
 */
export async function readUsage(db: Db, q: { accountId: string; offsetMinutes: number; from: string; to: string }) {
  const { start, days } = localDays(q.from, q.to, q.offsetMinutes, MAX_DAYS);
  const perDay = Array.from({ length: days }, (_, i) => ({
    date: new Date(start + q.offsetMinutes * 60_000 + i * DAY_MS).toISOString().slice(0, 10),
    ...emptyUsage(),
  }));
  const totals = emptyUsage();
  for (const row of await periodCounts(db, {
    accountId: q.accountId,
    channels: ['sms', 'email'],
    start,
    periods: days,
    periodMs: DAY_MS,
  })) {
    for (const usage of [perDay[row.period], totals]) {
      const channel = usage[row.channel];
      channel.statuses[row.status] = (channel.statuses[row.status] ?? 0) + row.messages;
      if (row.status === (row.channel === 'sms' ? 'Submitted' : 'Processed')) channel.messages += row.messages;
      const encoding = ENCODINGS[row.encoding];
      if (row.channel === 'sms' && row.status === 'Submitted' && encoding) usage.sms.parts[encoding] += row.parts;
      if (row.currency !== '')
        usage.costMicros.set(row.currency, (usage.costMicros.get(row.currency) ?? 0) + row.costMicros);
    }
  }
  return {
    from: q.from,
    to: q.to,
    days: perDay.map(({ date, ...day }) => ({ date, ...shown(day) })),
    totals: shown(totals),
  };
}

type UsageRead = Awaited<ReturnType<typeof readUsage>>;

const column = (channel: Channel, status: string) => `${channel}_${status.toLowerCase().replace(/ /g, '_')}`;

/**
 * `GET /usage?format=csv`: a row per day, the billed counts first, the cost in each currency of the
 * span (`cost_eur`), then a column for each status word some day of the span reached
 * (`sms_delivered`, `email_spam_report`, …).
 */
export function usageCsv(usage: UsageRead): string {
  const words = (channel: Channel) => Object.keys(usage.totals[channel].statuses).sort();
  const statusColumns = (['sms', 'email'] as const).flatMap((channel) =>
    words(channel).map((word) => ({ channel, word })),
  );
  const currencies = usage.totals.cost.map((cost) => cost.currency);
  const header = [
    'date',
    'sms_messages',
    'sms_parts_gsm7',
    'sms_parts_ucs2',
    'email_messages',
    ...currencies.map((currency) => `cost_${currency.toLowerCase()}`),
    ...statusColumns.map(({ channel, word }) => column(channel, word)),
  ];
  const rows = usage.days.map((day) => [
    day.date,
    day.sms.messages,
    day.sms.parts.gsm7,
    day.sms.parts.ucs2,
    day.email.messages,
    ...currencies.map((currency) => day.cost.find((cost) => cost.currency === currency)?.amount ?? '0.00'),
    ...statusColumns.map(({ channel, word }) => day[channel].statuses[word] ?? 0),
  ]);
  return `${[header, ...rows].map((row) => row.join(',')).join('\r\n')}\r\n`;
}
