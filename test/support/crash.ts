import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createAccount } from '../../src/accounts/service.ts';
import { systemClock } from '../../src/clock.ts';
import type { DialectName } from '../../src/db/database.ts';
import type { ContactsTable } from '../../src/db/schema.ts';
import { freePort, serveKeyEnv, start, type Running } from '../cli/support.ts';
import type { TestDatabase } from './databases.ts';
import { waitFor } from './wait.ts';

// What the crash tests (a real serve killed with SIGKILL, then another started on the same
// database) share, whatever the channel.

const PASSWORD = 'correct horse battery staple';

export type CrashSetup = Awaited<ReturnType<typeof crashSetUp>>;

/**
 * An account with a list of `size` contacts, each given its channel's fields by `contact`, and the
 * environment of a serve on the database.
 */
export async function crashSetUp(
  database: TestDatabase,
  dialect: DialectName,
  size: number,
  contact: (
    id: number,
  ) => Pick<ContactsTable, 'email' | 'mobile' | 'mobile_country_code' | 'mobile_opt_in' | 'email_opt_in'>,
) {
  const account = await createAccount(database.db, systemClock, {
    userName: `crash-${randomUUID()}@example.com`,
    password: PASSWORD,
  });
  const listId = randomUUID();
  await database.db
    .insertInto('contact_lists')
    .values({
      id: listId,
      account_id: account.id,
      name: 'Customers',
      name_key: 'customers',
      is_default: false,
      created_at: 0,
    })
    .execute();
  for (let from = 1; from <= size; from += 400) {
    const ids = Array.from({ length: Math.min(400, size - from + 1) }, (_, i) => from + i);
    await database.db
      .insertInto('contacts')
      .values(
        ids.map((id) => ({
          id,
          account_id: account.id,
          ...contact(id),
          properties: '{}',
          created_at: id,
          updated_at: id,
        })),
      )
      .execute();
    await database.db
      .insertInto('list_members')
      .values(ids.map((id) => ({ list_id: listId, contact_id: id, added_at: id })))
      .execute();
  }
  const port = await freePort();
  const env: Record<string, string> = {
    DATABASE_URL: database.url,
    PORT: String(port),
    WORKER_PORT: String(await freePort()),
    JOB_LEASE_SECONDS: '1',
    ...serveKeyEnv(dialect),
  };
  return { account, listId, env, base: `http://127.0.0.1:${port}` };
}

/** An access token of the setup's account, from the serve. */
export async function accessToken({ account, base }: CrashSetup): Promise<string> {
  const response = await fetch(`${base}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      userName: account.user_name,
      password: PASSWORD,
      privateToken: account.privateToken,
      validity: 'Default',
    }),
  });
  return ((await response.json()) as { access_token: string }).access_token;
}

/** POSTs `body` to `path` on the serve as the setup's account (with `token`, or a new one); answers the 202's body. */
export async function accepted(
  setup: CrashSetup,
  path: string,
  body: object,
  token?: string,
): Promise<{ data: Record<string, string> }> {
  const response = await fetch(`${setup.base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token ?? (await accessToken(setup))}` },
    body: JSON.stringify(body),
  });
  assert.equal(response.status, 202);
  return response.json();
}

/** Runs `work` against a serve started with `env`, then kills it (SIGKILL) whatever happened. */
export async function killedAfter<T>(env: Record<string, string>, work: (serve: Running) => Promise<T>): Promise<T> {
  const doomed = await start(['serve'], env);
  try {
    return await work(doomed);
  } finally {
    doomed.child.kill('SIGKILL');
    await new Promise((resolve) => doomed.child.once('exit', resolve));
  }
}

/** Serves again with `env` until the send is Completed, then stops the serve (SIGTERM). */
export async function servedUntilCompleted(
  database: TestDatabase,
  env: Record<string, string>,
  sendId: string,
  timeoutMs = 40_000,
): Promise<void> {
  const restarted = await start(['serve'], env);
  try {
    await waitFor(
      'the send Completed after the restart',
      async () =>
        (await database.db.selectFrom('sends').select('status').where('id', '=', sendId).executeTakeFirstOrThrow())
          .status === 'Completed' || undefined,
      { timeoutMs },
    );
  } finally {
    restarted.child.kill('SIGTERM');
    await new Promise((resolve) => restarted.child.once('exit', resolve));
  }
}

/** How many times each value occurs. */
export function tally(values: Iterable<string>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return counts;
}
