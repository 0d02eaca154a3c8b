/**
 * PostgreSQL: which statements are planned once, and which with their values at every run.
 *
 * `pg` sends a statement without a name as Parse, Bind, Execute, and PostgreSQL plans such a
 * statement with its values every time. That is what most of Herald's statements need: a plan
 * kept for a prepared statement is costed by the tables' sizes when it was made, and one made
 * while the tables were small scanned them whole once they were not (a seq scan of
 * send_recipients for every passcode page, and of sms_parts for every batch page's receipts;
 * a contact batch's update at 17.8 ms against 5.3). So statements go without a name.
 *
 * The exception is a statement marked PLAN_ONCE: one run for every message, cheap to run and
 * dear to plan, whose every plan is the same whatever the tables hold (lookups by unique or
 * near-unique keys). It is prepared on its connection's first run, and after five runs
 * PostgreSQL keeps a generic plan for it. A passcode's address check planned 0.14 ms to run
 * 0.015 (pg_stat_statements, bench:kannel).
 *
 * No setting forces plans with values on the connection (`plan_cache_mode` stays `auto`), since
 * it holds for PostgreSQL's own foreign-key checks too: forced, the check's query was planned
 * again for every row written, a sixth of PostgreSQL's CPU under bench:contacts; in psql,
 * 50,000 rows into a table with one foreign key took 1.1 to 1.2 s so, against 0.3 to 0.4 s.
 */
import type pg from 'pg';

/** Begins the text of a statement to plan once per connection (see above); whitespace may come before it. */
export const PLAN_ONCE = '/* plan once */';

/** A connection keeps every statement it prepared until it closes. */
const MAX_NAMED = 100;

const names = new Map<string, string>();

function nameOf(text: string): string | undefined {
  if (!text.trimStart().startsWith(PLAN_ONCE)) return undefined;
  const name = names.get(text);
  if (name !== undefined || names.size >= MAX_NAMED) return name;
  const named = `herald_${names.size + 1}`;
  names.set(text, named);
  return named;
}

/** Makes each client the pool opens prepare the statements marked PLAN_ONCE. */
export function prepareMarkedStatements(pool: pg.Pool): void {
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    client.query = ((config: unknown, values?: unknown, callback?: unknown) => {
      if (typeof config === 'string' && Array.isArray(values) && values.length > 0 && callback === undefined) {
        const name = nameOf(config);
        if (name !== undefined) return query({ name, text: config, values });
      }
      return query(config, values, callback);
    }) as typeof client.query;
  });
}
