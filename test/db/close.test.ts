import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, beforeEach, it } from 'node:test';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

const DATABASE_MODULE = new URL('../../src/db/database.ts', import.meta.url).href;
const PROCEDURES_MODULE = new URL('../../src/server/procedures.ts', import.meta.url).href;

/**
 * A process that opens `url` with the application's procedures, waits for it to be ready (on
 * SQLite the database's thread started, and nothing else run on it), closes it and does nothing
 * more: how long it took to exit of itself, or null if it was still running after `patienceMs`.
 */
async function exitAfterReadyAndClose(url: string, patienceMs: number): Promise<number | null> {
  const script = `
    import { openDatabase } from ${JSON.stringify(DATABASE_MODULE)};
    import { PROCEDURE_MODULES } from ${JSON.stringify(PROCEDURES_MODULE)};
    const database = openDatabase(${JSON.stringify(url)}, { procedures: PROCEDURE_MODULES });
    await database.ready();
    await database.close();
    console.log('closed');`;
  const child = spawn(process.execPath, ['--eval', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let closedAt: number | undefined;
  child.stdout.on('data', () => {
    closedAt ??= performance.now();
  });
  const killed = setTimeout(() => child.kill('SIGKILL'), patienceMs);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(killed);
  assert.ok(closedAt !== undefined, 'the process never closed the database');
  return code === 0 ? performance.now() - closedAt : null;
}

forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(() => database.close());

  it('lets its process exit once closed, though nothing but ready() used it', async () => {
    const lingered = await exitAfterReadyAndClose(database.url, 20_000);
    assert.notEqual(lingered, null, 'the process was still running 20 s after it closed the database');
    assert.ok(lingered! < 5_000, `the process took ${Math.round(lingered!)} ms to exit after closing`);
  });
});
