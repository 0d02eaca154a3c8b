import { sql, type Expression, type RawBuilder } from 'kysely';
import type { DialectName } from './dialect.ts';

/**
 * `x in (…)` over a list of any length as one JSON parameter, for the everyday reads
 * (property names, contactIds) whose lists come from a request and so have no fixed size.
 */
export function inJson(
  dialect: DialectName,
  values: readonly unknown[],
  type: 'text' | 'bigint' = 'text',
): Expression<any> {
  const json = JSON.stringify(values);
  const list: RawBuilder<unknown> =
    dialect === 'sqlite'
      ? sql`(select value from json_each(${json}))`
      : type === 'bigint'
        ? sql`(select jsonb_array_elements_text(${json}::jsonb)::bigint)`
        : sql`(select jsonb_array_elements_text(${json}::jsonb))`;
  return list;
}
