/**
 * PostgreSQL: the statements a process runs over and over are prepared once per connection.
 *
 * `pg` sends a statement without a name as Parse, Bind, Execute every time, so PostgreSQL
 * parses and plans it anew for each run: on the passcode path that was about a third of the
 * backends' time (an accept's statement: parse 0.17 ms, bind and plan 0.11 ms, execute 0.28
 * ms, from the server's log). A named statement is parsed on its connection's first run and
 * only bound after. Kysely hands `pg` the text alone, so names are given here, at the pool's
 * clients: a text with parameters gets one once it has run HOT_RUNS times (a statement with
 * a list of values spelled out, `in ($1, $2, …)`, is a new text at each length, mostly run
 * once), and at most MAX_NAMED texts do, since a connection keeps every statement it
 * prepared until it closes.
 *
 * A prepared statement is still planned at each run (PLANNED_AT_EACH_RUN): after five runs
 * PostgreSQL would keep one generic plan for it, costed by the tables' sizes at that moment,
 * until the next ANALYZE of them. On a new database, or a table that grew fast (a send's
 * 100,000 recipients written in seconds), that plan was the one for a table of ten rows: a
 * seq scan of send_recipients for every passcode page, and of sms_parts for every batch
 * page's receipts (8 ms a page and growing). The bench's batch on PostgreSQL went from 1,409 to
 * 4,215 messages/s without it, and passcodes idle were no slower: planning a statement costs
 * a fraction of parsing it.
 */
import { type Kysely, sql } from 'kysely';
import type pg from 'pg';
import type { DialectName } from './dialect.ts';

/**
 * The connections' option (pg's `options`) that makes PostgreSQL plan every statement with its
 * values and the tables as they are.
 */
export const PLANNED_AT_EACH_RUN = '-c plan_cache_mode=force_custom_plan';

const CACHED_PLANS_ON = 'set local plan_cache_mode = auto';
const CACHED_PLANS_OFF = 'set local plan_cache_mode = force_custom_plan';
const ENDS_TRANSACTION = new Set(['commit', 'rollback']);

const KEY_CHECKS_CACHED = {
  sqlite: undefined,
  postgres: { before: sql.raw(CACHED_PLANS_ON), after: sql.raw(CACHED_PLANS_OFF) },
};

/**
 * Runs a write of many rows, in the caller's transaction, with its foreign-key checks on cached
 * plans. PostgreSQL checks a foreign key with a query of its own for each row written, and
 * PLANNED_AT_EACH_RUN holds for that query too: each check was planned again, and the checks of a
 * 500-contact insert took longer than the insert (perf: a sixth of PostgreSQL's CPU under
 * bench:contacts went to planning them; in psql, 50,000 rows into a table with one foreign key
 * took 1.1 to 1.2 s so, against 0.3 to 0.4 s with the check's plan cached). Meanwhile the write's
 * own statements go without a name (prepareHotStatements), and PostgreSQL plans an unnamed
 * statement with its values every time, as it does under PLANNED_AT_EACH_RUN. The connection's
 * mode is back before the next statement. SQLite: the write alone.
 */
export async function withKeyChecksCached<DB, T>(
  db: Kysely<DB>,
  dialect: DialectName,
  write: () => Promise<T>,
): Promise<T> {
  const around = KEY_CHECKS_CACHED[dialect];
  if (!around) return write();
  // SET LOCAL outside a transaction does nothing, and the pool could give each step its own client.
  if (!db.isTransaction) throw new Error('withKeyChecksCached runs in the caller’s transaction');
  await around.before.execute(db);
  const result = await write();
  await around.after.execute(db);
  return result;
}

const HOT_RUNS = 3;
const MAX_NAMED = 300;
/** Texts counted at most; past it the counts start again (the hot ones have names by then). */
const MAX_COUNTED = 5000;

const names = new Map<string, string>();
let runs = new Map<string, number>();

function nameOf(text: string): string | undefined {
  const name = names.get(text);
  if (name !== undefined || names.size >= MAX_NAMED) return name;
  const seen = (runs.get(text) ?? 0) + 1;
  if (seen < HOT_RUNS) {
    if (runs.size >= MAX_COUNTED) runs = new Map();
    runs.set(text, seen);
    return undefined;
  }
  runs.delete(text);
  const named = `herald_${names.size + 1}`;
  names.set(text, named);
  return named;
}

/**
 * Makes each client the pool opens run its hot statements prepared, but for those of a write run
 * by withKeyChecksCached: under plan_cache_mode=auto a prepared statement is given a generic plan
 * after five runs (a bench:contacts batch's update went from 5.3 to 17.8 ms on one).
 */
export function prepareHotStatements(pool: pg.Pool): void {
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    let plansCached = false;
    client.query = ((config: unknown, values?: unknown, callback?: unknown) => {
      if (config === CACHED_PLANS_ON) plansCached = true;
      else if (config === CACHED_PLANS_OFF || (typeof config === 'string' && ENDS_TRANSACTION.has(config)))
        plansCached = false;
      const named = !plansCached && Array.isArray(values) && values.length > 0 && callback === undefined;
      if (typeof config === 'string' && named) {
        const name = nameOf(config);
        if (name !== undefined) return query({ name, text: config, values });
      }
      return query(config, values, callback);
    }) as typeof client.query;
  });
}
