import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Work that gives way. SQLite has one connection, taken in turn (sqlite.ts): a campaign's
 * pages and a webhook post's bookkeeping wait there beside the API's requests and the
 * one-time passcodes, and a passcode that queued behind a few 15 ms pages missed its
 * 100 ms. Statements and procedures run inside `inBackground` are handed the connection only
 * when nothing else waits for it; everything else (requests, passcodes) goes first, in turn.
 * PostgreSQL has a pool and runs them side by side: there it changes nothing.
 */
const background = new AsyncLocalStorage<true>();

export function inBackground<T>(work: () => Promise<T>): Promise<T> {
  return background.run(true, work);
}

export function isBackground(): boolean {
  return background.getStore() === true;
}
