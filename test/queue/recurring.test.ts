import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { retryDelayMs } from '../../src/queue/backoff.ts';
import { recurringHandler } from '../../src/queue/recurring.ts';
import { Worker } from '../../src/queue/worker.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';

const KIND = 'test.recurring';
const EVERY_MS = 60_000;
const START = Date.UTC(2026, 0, 1);

forEachDatabase((dialect) => {
  let database: TestDatabase;
  let clock: ManualClock;
  let started: Worker[];
  /** What the task does on its next runs: succeed, fail, or hold on until its worker stops. */
  let behaviour: 'succeed' | 'fail' | 'hold';
  let runs: number;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
    clock = new ManualClock(START);
    started = [];
    behaviour = 'succeed';
    runs = 0;
  });
  afterEach(async () => {
    await Promise.all(started.map((worker) => worker.stop()));
    await database.close();
  });

  const startWorker = async () => {
    const worker = new Worker({ database, clock, pollMs: 20, random: () => 0.5 });
    worker.register(
      KIND,
      recurringHandler(clock, {
        kind: KIND,
        everyMs: EVERY_MS,
        run: async (signal) => {
          runs += 1;
          if (behaviour === 'fail') throw new Error('the task failed');
          if (behaviour === 'hold') await new Promise((resolve) => signal.addEventListener('abort', resolve));
        },
      }),
    );
    started.push(worker);
    await worker.start();
    return worker;
  };
  const job = async () => {
    const rows = await database.db.selectFrom('jobs').selectAll().where('kind', '=', KIND).execute();
    assert.equal(rows.length, 1);
    return { ...rows[0], run_at: Number(rows[0].run_at) };
  };
  const waitForJob = (what: string, test: (row: Awaited<ReturnType<typeof job>>) => boolean) =>
    waitFor(what, async () => {
      const row = await job();
      return test(row) ? row : undefined;
    });

  it(
    'retries a failing run with the queue’s backoff, spending ' + 'attempts; dead, it runs again when a worker starts',
    async () => {
      const first = await startWorker();
      await waitForJob('the first run', (row) => row.run_at === START + EVERY_MS);
      assert.equal((await job()).attempts, 0);

      behaviour = 'fail';
      await database.db.updateTable('jobs').set({ max_attempts: 2 }).where('kind', '=', KIND).execute();
      clock.advance(EVERY_MS);
      const failed = await waitForJob('a failed run', (row) => row.attempts === 1 && row.state === 'ready');
      assert.equal(failed.run_at, clock.now() + retryDelayMs(1, 0.5));
      assert.equal(failed.last_error, 'the task failed');
      clock.advance(retryDelayMs(1, 0.5));
      await waitForJob('its death', (row) => row.state === 'dead');
      await first.stop();

      behaviour = 'succeed';
      const runsBefore = runs;
      clock.advance(EVERY_MS);
      await startWorker();
      const revived = await waitForJob(
        'the revived run',
        (row) => row.state === 'ready' && row.run_at === clock.now() + EVERY_MS,
      );
      assert.equal(runs, runsBefore + 1);
      assert.deepEqual([revived.id, revived.attempts, revived.finished_at], [failed.id, 0, null]);
    },
  );

  it('runs a run its worker’s stop cut short again at once, not an interval later', async () => {
    behaviour = 'hold';
    const first = await startWorker();
    await waitFor('the first run', async () => (runs === 1 ? true : undefined));
    await first.stop();
    const cut = await job();
    assert.deepEqual([cut.state, cut.run_at, cut.attempts], ['ready', START, 0]);

    behaviour = 'succeed';
    await startWorker();
    await waitForJob('the run taken up again', (row) => row.run_at === START + EVERY_MS);
    assert.equal(runs, 2);
  });
});
