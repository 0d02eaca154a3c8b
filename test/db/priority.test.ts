import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { sql } from 'kysely';
import { Registry } from 'prom-client';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { registerDatabaseMetrics } from '../../src/db/metrics.ts';
import { inBackground, nextInLine, Turns } from '../../src/db/priority.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';
import { blocksTheThread, markRun, marksItsRun } from './support/ordered-runs.ts';

const ORDERED = new URL('./support/ordered-runs.ts', import.meta.url).href;

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

describe('the next in line on SQLite’s thread', () => {
  const background = (since: number) => ({ urgent: false, since });
  const urgent = (since: number) => ({ urgent: true, since });
  const inTransaction = (since: number) => ({ urgent: undefined, since });

  it('takes the first urgent request before background ones that came earlier', () => {
    assert.equal(nextInLine([background(0), background(1), urgent(2), urgent(3)], 50), 2);
    assert.equal(nextInLine([background(0), background(1)], 50), 0);
  });

  it('takes nothing past a statement of a transaction', () => {
    assert.equal(nextInLine([background(0), inTransaction(1), urgent(2)], 50), 0);
  });

  it('takes the oldest once it has waited its patience', () => {
    assert.equal(nextInLine([background(0), urgent(2)], 99), 1);
    assert.equal(nextInLine([background(0), urgent(2)], 100), 0);
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

  // On SQLite a procedure, or a statement outside a transaction, is posted to the database's
  // thread and the connection handed on at once, so the turns order only the posting: the thread
  // itself takes an urgent request before background ones posted earlier. On PostgreSQL the
  // pool's turns do it, the connection held for each statement's answer.
  for (const way of ['procedure', 'statement'] as const) {
    it(`runs an urgent ${way} before background ones asked for earlier while the database is busy`, async () => {
      const counted = openDatabase(database.url, { procedures: [ORDERED], poolSize: 1 });
      const mark = (label: string) =>
        way === 'procedure' ? counted.call(marksItsRun, label) : markRun(counted.db, label);
      try {
        await counted.ready();
        const busy = await keepBusy(counted);
        // Each asked for a turn of the event loop after the one before: none together.
        for (const label of ['background 1', 'background 2', 'background 3']) {
          busy.marks.push(inBackground(() => mark(label)));
          await tick();
        }
        busy.marks.push(mark('urgent'));
        await busy.release();
        const ran = await counted.db.selectFrom('jobs').select('kind').orderBy('id').execute();
        assert.deepEqual(
          ran.map((row) => row.kind),
          ['urgent', 'background 1', 'background 2', 'background 3'],
        );
      } finally {
        await counted.close();
      }
    });
  }

  const tick = () => new Promise((resolve) => setImmediate(resolve));

  /**
   * Keeps the database busy until `release`, which then waits for `marks`: SQLite's thread
   * blocked in a procedure (what is posted meanwhile waits in its queue), PostgreSQL's one
   * connection held in a transaction (what asks meanwhile waits for a turn).
   */
  async function keepBusy(
    counted: Database,
  ): Promise<{ marks: Array<Promise<unknown>>; release: () => Promise<void> }> {
    const marks: Array<Promise<unknown>> = [];
    if (dialect === 'sqlite') {
      const hold = new Int32Array(new SharedArrayBuffer(8));
      marks.push(counted.call(blocksTheThread, hold));
      await waitFor('the thread blocked', async () => (Atomics.load(hold, 1) === 1 ? true : undefined));
      return {
        marks,
        release: async () => {
          await tick();
          const unposted = counted.waitingForConnection();
          Atomics.store(hold, 0, 1);
          Atomics.notify(hold, 0);
          await Promise.all(marks);
          assert.equal(unposted, 0, 'everything was posted while the thread was blocked');
        },
      };
    }
    let release!: () => void;
    let holding!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    marks.push(
      counted.db.transaction().execute(async () => {
        holding();
        await new Promise<void>((resolve) => (release = resolve));
      }),
    );
    await held;
    return {
      marks,
      release: async () => {
        await waitFor('four waiting for the connection', async () =>
          counted.waitingForConnection() === 4 ? true : undefined,
        );
        release();
        await Promise.all(marks);
      },
    };
  }
});
