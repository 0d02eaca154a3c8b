import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { inBackground } from '../../src/db/priority.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

// A database's connections are taken in turn, urgent work first (db/priority.ts): SQLite's
// one, and PostgreSQL's pool (here of one connection, so that one held transaction fills it).
forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect, { poolSize: 1 });
  });
  afterEach(() => database.close());

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  /** Holds the connection in a transaction until the returned release is called. */
  async function holdConnection(): Promise<{ release: () => void; done: Promise<void> }> {
    let release!: () => void;
    let holding!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    const done = database.db.transaction().execute(async () => {
      holding();
      await new Promise<void>((resolve) => (release = resolve));
    });
    await held;
    return { release, done };
  }

  /**
   * With the connection held, background work asks for it, then `urgentAfter` ms later urgent
   * work does; the connection is then let go. The order in which the two got it.
   */
  async function orderOfTurns(urgentAfter: number): Promise<string[]> {
    const order: string[] = [];
    const { release, done } = await holdConnection();
    const background = inBackground(() => sql`select 1`.execute(database.db)).then(() => order.push('background'));
    await sleep(urgentAfter);
    const urgent = sql`select 1`.execute(database.db).then(() => order.push('urgent'));
    await sleep(5);
    release();
    await Promise.all([done, background, urgent]);
    return order;
  }

  it('hands the connection to urgent work before background work that waited longer', async () => {
    assert.deepEqual(await orderOfTurns(5), ['urgent', 'background']);
  });

  it('gives background work its turn once it has waited its patience, urgent work waiting or not', async () => {
    assert.deepEqual(await orderOfTurns(150), ['background', 'urgent']);
  });
});
