import pg from 'pg';

/**
 * Each statement Herald's connections send to PostgreSQL, with its parameters, shown to the
 * test's watcher, which may hold the statement back until it resolves. Installed when this module
 * loads, before any connection is made: each binds its query method at connect (db/prepared.ts).
 */
export type StatementWatcher = (text: string, values: readonly unknown[]) => void | Promise<void>;

let watcher: StatementWatcher | undefined;

/** Sets the watcher of every statement from now on; undefined to stop watching. */
export function watchPostgres(next: StatementWatcher | undefined): void {
  watcher = next;
}

const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  if (watcher === undefined) return query.apply(this, args);
  const [config, values] = args as [{ text?: string; values?: unknown[] } | string, unknown[] | undefined];
  const text = typeof config === 'string' ? config : (config.text ?? '');
  const held = watcher(text, values ?? (typeof config === 'object' ? (config.values ?? []) : []));
  return held instanceof Promise ? held.then(() => query.apply(this, args)) : query.apply(this, args);
} as typeof pg.Client.prototype.query;
