import type { Kysely } from 'kysely';
import type { DialectName } from './database.ts';
import type { Schema } from './schema.ts';

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
export interface Procedure<A, R> {
  /** import.meta.url of the module that exports the procedure, under `name`. */
  module: string;
  name: string;
  run(database: ProcedureDatabase, args: A): Promise<R>;
}

export function procedure<A, R>(module: string, name: string, run: (database: ProcedureDatabase, args: A) => Promise<R>): Procedure<A, R> {
  return { module, name, run };
}

/** Where a procedure is defined: enough to find it again on another thread. */
export interface ProcedureRef {
  module: string;
  name: string;
}

export async function loadProcedure(ref: ProcedureRef): Promise<Procedure<unknown, unknown>> {
  const found = (await import(ref.module))[ref.name] as Procedure<unknown, unknown> | undefined;
  if (!found?.run) throw new Error(`${ref.module} exports no procedure ${ref.name}`);
  return found;
}
