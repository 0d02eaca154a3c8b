import { sql, type Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { BUCKET_MS } from '../messaging/rollup.ts';
import { localDays, MAX_DAYS } from '../messaging/usage.ts';

type Db = Kysely<Schema>;

const DAY_MS = 86_400_000;

interface CountryCounts {
  country: string;
  started: number;
  approved: number;
  failed: number;
  expired: number;
}

/**
 * `GET /verify/stats`: verifications started over local days `from` through `to`, with how many
 * of them ended approved, failed and expired (a pending one past its end counts as expired),
 * and the attempts the fraud guard blocked, by reason. What retention purged is read from its
 * rollup (retention.ts), the rest from the rows themselves, so the figures outlive the rows.
 */
export async function readVerifyStats(
  db: Db,
  query: { accountId: string; offsetMinutes: number; from: string; to: string; now: number },
) {
  const { start, days } = localDays(query.from, query.to, query.offsetMinutes, MAX_DAYS);
  const end = start + days * DAY_MS;
  const { accountId, now } = query;
  // One statement, one snapshot: a retention chunk folding rows into the rollup as the stats
  // are read is counted once, never in both or neither (PostgreSQL would read each of three
  // statements on its own connection).
  const { rows } = await sql<CountryCounts & { blocked_country: number; blocked_prefix: number }>`
    select country, count(*) as started,
           sum(case when status = 'approved' then 1 else 0 end) as approved,
           sum(case when status = 'failed' then 1 else 0 end) as failed,
           sum(case when status = 'expired' or (status = 'pending' and expires_at <= ${now}) then 1 else 0 end)
             as expired,
           0 as blocked_country, 0 as blocked_prefix
      from verifications
     where account_id = ${accountId} and created_at >= ${start} and created_at < ${end}
     group by country
    union all
    select country, sum(started), sum(approved), sum(failed), sum(expired), sum(blocked_country), sum(blocked_prefix)
      from verify_rollup
     where account_id = ${accountId} and bucket >= ${start / BUCKET_MS} and bucket < ${end / BUCKET_MS}
     group by country
    union all
    select country, 0, 0, 0, 0, sum(case when reason = 'country' then 1 else 0 end),
           sum(case when reason = 'prefix' then 1 else 0 end)
      from verify_blocked
     where account_id = ${accountId} and at >= ${start} and at < ${end}
     group by country`.execute(db);
  const byCountry = new Map<string, CountryCounts>();
  const blockedBy = { country: 0, prefix: 0 };
  for (const row of rows) {
    blockedBy.country += Number(row.blocked_country);
    blockedBy.prefix += Number(row.blocked_prefix);
    if (Number(row.started) === 0) continue;
    const sum = byCountry.get(row.country) ?? { country: row.country, started: 0, approved: 0, failed: 0, expired: 0 };
    sum.started += Number(row.started);
    sum.approved += Number(row.approved);
    sum.failed += Number(row.failed);
    sum.expired += Number(row.expired);
    byCountry.set(row.country, sum);
  }
  const total = (key: keyof Omit<CountryCounts, 'country'>) =>
    [...byCountry.values()].reduce((sum, counts) => sum + counts[key], 0);
  const started = total('started');
  const approved = total('approved');
  return {
    started,
    approved,
    failed: total('failed'),
    expired: total('expired'),
    blocked: blockedBy.country + blockedBy.prefix,
    blockedBy,
    conversionRate: started === 0 ? 0 : Math.round((approved / started) * 10_000) / 10_000,
    byCountry: [...byCountry.values()]
      .filter((counts) => counts.country !== '')
      .sort((a, b) => b.started - a.started || a.country.localeCompare(b.country))
      .map(({ country, started, approved }) => ({ country, started, approved })),
  };
}
