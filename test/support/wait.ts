import { sql, type Kysely } from 'kysely';
import type { Schema } from '../../src/db/schema.ts';

/** Polls `probe` every 10 ms until it gives a value, for at most `timeoutMs` (10 s; then fails naming `what`). */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  { timeoutMs = 10_000 } = {},
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * On PostgreSQL, until some session waits for a lock (of `locktype`, when given), or `settled`
 * says the work watched ended first: the moment a test's concurrent transaction is known to block.
 */
export function waitForLockWait(
  db: Kysely<Schema>,
  what: string,
  settled: () => boolean,
  locktype?: string,
): Promise<true> {
  const ofType = locktype === undefined ? sql`` : sql`and locktype = ${locktype}`;
  return waitFor(what, async () => {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_locks
                                                where not granted ${ofType}`.execute(db);
    return settled() || rows[0].n > 0 ? true : undefined;
  });
}
