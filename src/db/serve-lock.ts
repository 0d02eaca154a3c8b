import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

/** SQLITE_BUSY: another connection holds a lock this one asked for without waiting. */
const SQLITE_BUSY = 5;

export interface ServeLock {
  path: string;
  release(): void;
}

/**
 * One `herald serve` per SQLite database (ARCHITECTURE.md: on SQLite exactly one process
 * runs): two would each run the queue's workers and checkpointer on one file. The lock is
 * SQLite's own file lock (fcntl) on a side file, never on the database, so `herald account …`
 * and `herald migrate` still open the database beside a running serve. The kernel drops it
 * when the process dies, however it dies: a restart after kill -9 is never refused.
 *
 * EXCLUSIVE locking mode keeps the lock of the transaction begun here until the connection
 * closes; an in-memory journal, because a rollback journal on disk would sit beside the side
 * file for the process's life. The side file stays after release: deleting it could let a
 * process that opened the old file and one that creates a new one both hold "the" lock.
 *
 * Returns undefined when another process holds it.
 */
export function takeServeLock(databasePath: string): ServeLock | undefined {
  const path = `${databasePath}-serve.lock`;
  mkdirSync(dirname(path), { recursive: true });
  // timeout 0: a held lock answers SQLITE_BUSY at once rather than after a wait.
  const lock = new DatabaseSync(path, { timeout: 0 });
  try {
    lock.exec('PRAGMA journal_mode = MEMORY');
    lock.exec('PRAGMA locking_mode = EXCLUSIVE');
    lock.exec('BEGIN EXCLUSIVE');
  } catch (error) {
    lock.close();
    if ((error as { errcode?: number }).errcode === SQLITE_BUSY) return undefined;
    throw error;
  }
  return { path, release: () => lock.close() };
}
