import { sql, type Expression, type RawBuilder, type SqlBool } from 'kysely';
import type { DialectName } from './dialect.ts';

/**
 * `x in (…)` over a list of any length as one JSON parameter, for the everyday reads
 * (property names, contactIds) whose lists come from a request and so have no fixed size.
 */
export function inJson<T>(dialect: DialectName, values: readonly T[], type: 'text' | 'bigint' = 'text'): Expression<T> {
  const json = JSON.stringify(values);
  const list: RawBuilder<T> =
    dialect === 'sqlite'
      ? sql<T>`(select value from json_each(${json}))`
      : type === 'bigint'
        ? sql<T>`(select jsonb_array_elements_text(${json}::jsonb)::bigint)`
        : sql<T>`(select jsonb_array_elements_text(${json}::jsonb))`;
  return list;
}

/**
 * `column` is one of `values`, as a condition: on PostgreSQL `= any` of one typed array, which
 * its planner reads as lookups in the column's index, one a value, and never as a join. For
 * the operator ids of a batch of receipts, `in` a set of them (inJson) was planned by stale
 * statistics as a join: it hashed every part of the table (50 to 100 ms a batch at 100,000
 * parts), or compared each of 18,000 waiting receipts with each of 3,000 ids (6.5 s).
 */
export function isAnyOf(dialect: DialectName, column: string, values: readonly string[]): RawBuilder<SqlBool> {
  return dialect === 'sqlite'
    ? sql<SqlBool>`${sql.ref(column)} in (select value from json_each(${JSON.stringify(values)}))`
    : sql<SqlBool>`${sql.ref(column)} = any(${values}::text[])`;
}
