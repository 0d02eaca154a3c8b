import { sql, type RawBuilder, type SqlBool } from 'kysely';
import type { DialectName } from './dialect.ts';

/**
 * A condition that picks at most `limit` rows of `table` matching `where`: how a bulk delete
 * or update is cut into chunks, each its own short statement.
 *
 * Rows are picked by `key`, a column that names one row, or by default by their physical row
 * id (PostgreSQL's ctid, SQLite's rowid), the cheapest to find again. On PostgreSQL a row
 * another transaction changes meanwhile gets a new ctid, and the chunk leaves it out: right for
 * a purge that may take it next time; where every picked row must be taken (a later step counts
 * on it), name its key. Give the statement `where` as well, so that a row changed meanwhile is
 * checked again and left alone if it no longer matches.
 *
 * `= any(array(…))` on PostgreSQL: `id in (select id … limit n)` let its planner hash-join the
 * whole table against the chunk, 143 ms for 10,000 of 200,000 webhook deliveries, where this
 * takes 9 ms, and the gap grows with the table.
 */
export function chunkOf(
  dialect: DialectName,
  table: string,
  where: RawBuilder<SqlBool>,
  limit: number,
  key?: string,
): RawBuilder<SqlBool> {
  const from = sql.table(table);
  const id = sql.ref(key ?? (dialect === 'postgres' ? 'ctid' : 'rowid'));
  return dialect === 'postgres'
    ? sql<SqlBool>`${id} = any(array(select ${id} from ${from} where ${where} limit ${limit}))`
    : sql<SqlBool>`${id} in (select ${id} from ${from} where ${where} limit ${limit})`;
}
