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
  const [live, rolled, blocked] = await Promise.all([
    sql<CountryCounts>`
      select country, count(*) as started,
             sum(case when status = 'approved' then 1 else 0 end) as approved,
             sum(case when status = 'failed' then 1 else 0 end) as failed,
             sum(case when status = 'expired' or (status = 'pending' and expires_at <= ${now}) then 1 else 0 end)
               as expired
        from verifications
       where account_id = ${accountId} and created_at >= ${start} and created_at < ${end}
       group by country`.execute(db),
    sql<CountryCounts & { blocked_country: number; blocked_prefix: number }>`
      select country, sum(started) as started, sum(approved) as approved, sum(failed) as failed,
             sum(expired) as expired, sum(blocked_country) as blocked_country, sum(blocked_prefix) as blocked_prefix
        from verify_rollup
       where account_id = ${accountId} and bucket >= ${start / BUCKET_MS} and bucket < ${end / BUCKET_MS}
       group by country`.execute(db),
    sql<{ reason: 'country' | 'prefix'; attempts: number }>`
      select reason, count(*) as attempts from verify_blocked
       where account_id = ${accountId} and at >= ${start} and at < ${end}
       group by reason`.execute(db),
  ]);
  const byCountry = new Map<string, CountryCounts>();
  for (const row of [...live.rows, ...rolled.rows]) {
    const sum = byCountry.get(row.country) ?? { country: row.country, started: 0, approved: 0, failed: 0, expired: 0 };
    sum.started += Number(row.started);
    sum.approved += Number(row.approved);
    sum.failed += Number(row.failed);
    sum.expired += Number(row.expired);
    byCountry.set(row.country, sum);
  }
  const blockedBy = { country: 0, prefix: 0 };
  for (const row of blocked.rows) blockedBy[row.reason] += Number(row.attempts);
  for (const row of rolled.rows) {
    blockedBy.country += Number(row.blocked_country);
    blockedBy.prefix += Number(row.blocked_prefix);
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
