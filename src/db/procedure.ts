import type { Kysely } from 'kysely';
import type { DialectName } from './dialect.ts';
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

const defined = new Set<Procedure<unknown, unknown>>();

export function procedure<A, R>(
  module: string,
  name: string,
  run: (database: ProcedureDatabase, args: A) => Promise<R>,
): Procedure<A, R> {
  const defining: Procedure<A, R> = { module, name, run };
  defined.add(defining as Procedure<unknown, unknown>);
  return defining;
}

/** Procedures by `module#name`, as resolveProcedures found them. */
export type Procedures = ReadonlyMap<string, Procedure<unknown, unknown>>;

const keyOf = (ref: ProcedureRef) => `${ref.module}#${ref.name}`;

/** The application's source tree: every procedure defined there belongs in the registry. */
const APPLICATION = new URL('../', import.meta.url).href;

/**
 * Imports every module of the registry (src/server/procedures.ts) and checks that each procedure
 * is exported under the name and from the module it gives, and that every procedure of the
 * application this thread has defined is one of them: what another thread is asked to find
 * by ref, it finds.
 */
export async function resolveProcedures(modules: readonly string[]): Promise<Procedures> {
  const found = new Map<string, Procedure<unknown, unknown>>();
  for (const module of modules) {
    for (const [exported, value] of Object.entries((await import(module)) as Record<string, unknown>)) {
      if (!defined.has(value as Procedure<unknown, unknown>)) continue;
      const candidate = value as Procedure<unknown, unknown>;
      if (candidate.module !== module || candidate.name !== exported) {
        throw new Error(
          `${module} exports the procedure ${exported} under the ref ${candidate.name} of ${candidate.module}`,
        );
      }
      found.set(keyOf(candidate), candidate);
    }
  }
  for (const candidate of defined) {
    if (candidate.module.startsWith(APPLICATION) && found.get(keyOf(candidate)) !== candidate) {
      const registry = 'the procedure registry (src/server/procedures.ts)';
      throw new Error(`the procedure ${candidate.name} of ${candidate.module} is in no module of ${registry}`);
    }
  }
  return found;
}

export function findProcedure(procedures: Procedures, ref: ProcedureRef): Procedure<unknown, unknown> {
  const found = procedures.get(keyOf(ref));
  if (!found) throw new Error(`no procedure ${ref.name} of ${ref.module} was resolved at start`);
  return found;
}
