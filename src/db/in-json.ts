import { sql, type Expression, type RawBuilder } from 'kysely';
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
