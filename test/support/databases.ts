import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from 'node:test';
import pg from 'pg';
import { migrateToLatest, openDatabase, type Database, type DialectName } from '../../src/db/database.ts';
import { PROCEDURE_MODULES } from '../../src/server/procedures.ts';

/**
 * One suite, every database (STYLE.md): storage tests are written once and run on
 * SQLite and PostgreSQL. Each test gets a fresh database, a copy of one migrated once: a
 * file copied on SQLite (migrating took 100 to 400 ms a test), a database made from a
 * template on PostgreSQL (CREATE DATABASE … TEMPLATE takes 0.25 to 0.35 s here, most of it
 * copying the system catalogs, where migrating an empty database takes about 0.4 s).
 */
export const DIALECTS: DialectName[] = ['sqlite', 'postgres'];

export const POSTGRES_ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export function forEachDatabase(body: (dialect: DialectName) => void): void {
  for (const dialect of DIALECTS) describe(dialect, () => body(dialect));
}

export interface TestDatabase extends Database {
  url: string;
}

function withDatabase(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

// The template's name carries a hash of the migrations, so a changed migration gets a new template.
function templateName(): string {
  const dir = new URL('../../src/db/migrations/', import.meta.url);
  const hash = createHash('sha256');
  for (const file of readdirSync(dir).sort()) hash.update(file).update(readFileSync(new URL(file, dir)));
  return `herald_template_${hash.digest('hex').slice(0, 12)}`;
}

let templateReady: Promise<string> | undefined;
let sqliteTemplate: Promise<string> | undefined;

/** A SQLite file migrated once a process, removed at its exit: closed, so the file alone holds every page. */
async function migratedSqliteFile(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-template-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'herald.db');
  const database = openDatabase(`sqlite:${path}`);
  await migrateToLatest(database);
  await database.close();
  return path;
}

async function ensureTemplate(admin: pg.Client): Promise<string> {
  const name = templateName();
  // Test files run in parallel processes: one builds the template, the others wait on the lock.
  await admin.query(`select pg_advisory_lock(hashtext('herald_test_template'))`);
  try {
    const { rowCount } = await admin.query('select 1 from pg_database where datname = $1', [name]);
    if (!rowCount) {
      const building = `${name}_building`;
      await admin.query(`drop database if exists ${building} with (force)`);
      await admin.query(`create database ${building}`);
      const database = openDatabase(withDatabase(POSTGRES_ADMIN_URL, building), { poolSize: 1 });
      await migrateToLatest(database);
      await database.close();
      await admin.query(`alter database ${building} rename to ${name}`);
    }
  } finally {
    await admin.query(`select pg_advisory_unlock(hashtext('herald_test_template'))`);
  }
  return name;
}

async function withAdmin<T>(fn: (admin: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(`PostgreSQL is required for the tests at ${POSTGRES_ADMIN_URL}: ${(error as Error).message}`);
  }
  try {
    return await fn(admin);
  } finally {
    await admin.end();
  }
}

/**
 * A fresh database of the dialect, running the application's procedures, migrated unless `empty`;
 * close() also deletes it.
 */
export async function createTestDatabase(
  dialect: DialectName,
  options: { poolSize?: number; empty?: boolean } = {},
): Promise<TestDatabase> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'herald-test-'));
    const path = join(dir, 'herald.db');
    if (!options.empty) {
      sqliteTemplate ??= migratedSqliteFile();
      copyFileSync(await sqliteTemplate, path);
    }
    const url = `sqlite:${path}`;
    const database = openDatabase(url, { procedures: PROCEDURE_MODULES });
    return {
      ...database,
      url,
      close: async () => {
        await database.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const name = `herald_test_${randomBytes(6).toString('hex')}`;
  await withAdmin(async (admin) => {
    if (options.empty) return admin.query(`create database ${name}`);
    templateReady ??= ensureTemplate(admin);
    const template = await templateReady;
    await admin.query(`create database ${name} template ${template}`);
  });
  const url = withDatabase(POSTGRES_ADMIN_URL, name);
  const database = openDatabase(url, { ...options, procedures: PROCEDURE_MODULES });
  return {
    ...database,
    url,
    close: async () => {
      await database.close();
      await withAdmin((admin) => admin.query(`drop database if exists ${name} with (force)`));
    },
  };
}
