import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import type { DialectName } from '../../src/db/database.ts';
import type { TestApp } from './app.ts';

/** Where each needle is in the database's storage: SQLite's files as bytes, or every text column of PostgreSQL. */
export async function foundInStorage(
  api: { t: TestApp },
  dialect: DialectName,
  needles: string[],
): Promise<Record<string, string[]>> {
  const found: Record<string, string[]> = Object.fromEntries(needles.map((needle) => [needle, []]));
  if (dialect === 'sqlite') {
    const file = api.t.database.url.slice('sqlite:'.length);
    // The WAL first: a checkpoint between the two reads then still leaves every page in one of them.
    for (const path of [`${file}-wal`, file]) {
      if (!existsSync(path)) continue;
      const bytes = readFileSync(path);
      for (const needle of needles)
        if (bytes.includes(Buffer.from(needle))) found[needle].push(path.slice(file.length) || 'database');
    }
    return found;
  }
  const db = api.t.ctx.db;
  const { rows: columns } = await sql<{ table_name: string; column_name: string }>`
    select table_name, column_name from information_schema.columns
     where table_schema = current_schema()
       and data_type in ('text', 'character varying', 'character', 'json', 'jsonb')`.execute(db);
  assert.ok(
    columns.some((c) => c.table_name === 'sends' && c.column_name === 'content'),
    'the columns of the application are listed',
  );
  for (const { table_name: table, column_name: column } of columns) {
    for (const needle of needles) {
      const { rows } = await sql<{
        n: string;
      }>`select count(*) as n from ${sql.table(table)} where strpos(${sql.ref(column)}::text, ${needle}) > 0`.execute(
        db,
      );
      if (Number(rows[0].n) > 0) found[needle].push(`${table}.${column}`);
    }
  }
  return found;
}

const PG_DUMP = ['/usr/bin/pg_dump', '/usr/lib/postgresql/15/bin/pg_dump'].find((path) => existsSync(path));

/** All of a PostgreSQL database as `pg_dump` writes it, as a backup would hold it. */
export async function pgDump(url: string): Promise<Buffer> {
  assert.ok(PG_DUMP, 'pg_dump is installed');
  const options = { encoding: 'buffer', maxBuffer: 1 << 28 } as const;
  return (await promisify(execFile)(PG_DUMP, [`--dbname=${url}`], options)).stdout;
}

/** Every table of the database by name, with its row count: what a read-only call must leave as it found. */
export async function rowCounts(api: { t: TestApp }, dialect: DialectName): Promise<Record<string, number>> {
  const db = api.t.ctx.db;
  const { rows: tables } =
    dialect === 'sqlite'
      ? await sql<{ name: string }>`select name from sqlite_master where type = 'table'
                                      and name not like 'sqlite_%' order by name`.execute(db)
      : await sql<{ name: string }>`select table_name as name from information_schema.tables
                                     where table_schema = current_schema() and table_type = 'BASE TABLE'
                                     order by table_name`.execute(db);
  assert.ok(
    tables.some((table) => table.name === 'sends'),
    'the tables of the application are listed',
  );
  const counts: Record<string, number> = {};
  for (const { name } of tables) {
    const { rows } = await sql<{ n: number | string }>`select count(*) as n from ${sql.table(name)}`.execute(db);
    counts[name] = Number(rows[0].n);
  }
  return counts;
}
