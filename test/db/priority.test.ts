import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { sql } from 'kysely';
import { Registry } from 'prom-client';
import { registerDatabaseMetrics } from '../../src/db/metrics.ts';
import { inBackground, Turns } from '../../src/db/priority.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';

describe('turns', () => {
  /**
   * With the one turn held, background work asks for it, then `urgentAfter` ms later (on the
   * turns' clock) urgent work does; the turn is then given back. The order in which the two got it.
   */
  async function orderOfTurns(urgentAfter: number): Promise<string[]> {
    let now = 0;
    const turns = new Turns(1, () => now);
    const order: string[] = [];
    await turns.take();
    const background = inBackground(() => turns.take()).then(() => order.push('background'));
    now += urgentAfter;
    const urgent = turns.take().then(() => order.push('urgent'));
    assert.equal(turns.waiting, 2);
    turns.give();
    await Promise.race([background, urgent]);
    turns.give();
    await Promise.all([background, urgent]);
    assert.equal(turns.waiting, 0);
    return order;
  }

  it('hands the turn to urgent work before background work that waited longer', async () => {
    assert.deepEqual(await orderOfTurns(99), ['urgent', 'background']);
  });

  it('gives background work its turn once it has waited its patience, urgent work waiting or not', async () => {
    assert.deepEqual(await orderOfTurns(100), ['background', 'urgent']);
  });
});

// A database's connections are taken in turn, urgent work first: SQLite's one, and
// PostgreSQL's pool (here of one connection, so that one held transaction fills it).
forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect, { poolSize: 1 });
  });
  afterEach(() => database.close());

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

  /** Resolves once `count` callers wait for the connection. */
  const waiting = (count: number) =>
    waitFor(`${count} waiting for the connection`, async () =>
      database.waitingForConnection() === count ? true : undefined,
    );

  it('reports the callers waiting for the connection in /metrics', async () => {
    const registry = new Registry();
    registerDatabaseMetrics(registry, database);
    const waiters = async () =>
      (await registry.getSingleMetricAsString('herald_db_connection_waiters')).split(' ').at(-1);
    const { release, done } = await holdConnection();
    assert.equal(await waiters(), '0', 'the holder itself does not wait');
    const queued = sql`select 1`.execute(database.db);
    await waiting(1);
    assert.equal(await waiters(), '1');
    release();
    await Promise.all([done, queued]);
    assert.equal(await waiters(), '0');
  });

  it('hands the connection to urgent work before background work that asked first', async () => {
    const order: string[] = [];
    const { release, done } = await holdConnection();
    const background = inBackground(() => sql`select 1`.execute(database.db)).then(() => order.push('background'));
    await waiting(1);
    const urgent = sql`select 1`.execute(database.db).then(() => order.push('urgent'));
    await waiting(2);
    release();
    await Promise.all([done, background, urgent]);
    assert.deepEqual(order, ['urgent', 'background']);
  });
});
