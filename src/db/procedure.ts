import type { Kysely } from 'kysely';
import type { DialectName } from './database.ts';
import type { Schema } from './schema.ts';

/** Where a procedure is defined: enough to find it again on another thread. */
export interface ProcedureRef {
  /** import.meta.url of the module that exports the procedure, under `name`. */
  module: string;
  name: string;
}

/** What a procedure runs against: the connection where it runs, and its dialect. */
export interface ProcedureDatabase {
  db: Kysely<Schema>;
  dialect: DialectName;
}

/**
 * Database work that runs in one go where the data is, called with `database.call`. On
 * PostgreSQL that is this process, through the pool. On SQLite it is the database's own
 * thread (sqlite-thread.ts), which imports the module that defines the procedure and runs
 * it against the connection there: a transaction of many statements with work between them
 * then costs no message per statement, and no wait for a main thread busy with requests
 * between them. Arguments and results cross threads, so they are plain data.
 */
export interface Procedure<A, R> extends ProcedureRef {
  run(database: ProcedureDatabase, args: A): Promise<R>;
}

export function procedure<A, R>(module: string, name: string, run: (database: ProcedureDatabase, args: A) => Promise<R>): Procedure<A, R> {
  return { module, name, run };
}

const loaded = new Map<string, Procedure<unknown, unknown>>();

/** The procedure a ref names, imported once per thread: procedures run on hot paths. */
export async function loadProcedure(ref: ProcedureRef): Promise<Procedure<unknown, unknown>> {
  const key = `${ref.module}#${ref.name}`;
  let found = loaded.get(key);
  if (!found) {
    found = (await import(ref.module))[ref.name] as Procedure<unknown, unknown> | undefined;
    if (!found?.run) throw new Error(`${ref.module} exports no procedure ${ref.name}`);
    loaded.set(key, found);
  }
  return found;
}
