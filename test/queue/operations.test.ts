import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { enqueue, enqueueMany, PRIORITY } from '../../src/queue/queue.ts';
import { Worker } from '../../src/queue/worker.ts';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, startTestApp, type TestApp } from '../support/app.ts';

forEachDatabase((dialect) => {
  let t: TestApp;
  beforeEach(async () => {
    t = await startTestApp(dialect);
  });
  afterEach(() => t.close());

  it('reports queue depth by kind and state, and the age of the oldest due job, in /metrics', async () => {
    const now = t.clock.now();
    await enqueueMany(t.ctx.db, [
      { kind: 'sms.send', payload: 1, now: now - 90_000 },
      { kind: 'sms.send', payload: 2, now: now - 1_000 },
      { kind: 'sms.send', payload: 3, now, runAt: now + 60_000 },
      { kind: 'email.send', payload: 4, now: now - 5_000 },
    ]);
    const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    assert.match(metrics, /^herald_queue_jobs\{kind="sms\.send",state="ready"\} 3$/m);
    assert.match(metrics, /^herald_queue_jobs\{kind="email\.send",state="ready"\} 1$/m);
    assert.match(metrics, /^herald_queue_oldest_ready_age_seconds\{kind="sms\.send"\} 90$/m);
    assert.match(metrics, /^herald_queue_oldest_ready_age_seconds\{kind="email\.send"\} 5$/m);
  });

  it('answers /metrics without the queue’s figures while the database cannot be read', async () => {
    await t.ctx.database.close();
    const response = await t.app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(response.statusCode, 200, response.body);
    assert.match(response.body, /^process_cpu_user_seconds_total /m, 'the process’s own figures');
    assert.doesNotMatch(response.body, /^herald_queue_jobs\{/m);
  });

  it('lets the operator list dead jobs with their last error, and run one again', async () => {
    await enqueue(t.ctx.db, { kind: 'sms.send', payload: { to: '919900000001' }, now: t.clock.now(), maxAttempts: 1 });
    let failing = true;
    const worker = new Worker({ database: t.ctx.database, clock: t.clock });
    worker.register('sms.send', {
      handle: async () => {
        if (failing) throw new Error('the SMSC refused the bind');
      },
    });
    await worker.drain();

    const admin = (method: 'GET' | 'POST', url: string) => t.app.inject({ method, url, headers: bearer(ADMIN_TOKEN) });
    const dead = await admin('GET', '/admin/jobs');
    assert.equal(dead.statusCode, 200);
    const [job] = dead.json().jobs;
    assert.deepEqual(
      {
        kind: job.kind,
        state: job.state,
        attempts: job.attempts,
        lapses: job.lapses,
        priority: job.priority,
        lastError: job.lastError,
      },
      {
        kind: 'sms.send',
        state: 'dead',
        attempts: 1,
        lapses: 0,
        priority: PRIORITY.fanout,
        lastError: 'the SMSC refused the bind',
      },
    );
    await t.ctx.db.updateTable('jobs').set({ lapses: 3 }).where('id', '=', job.id).execute();
    assert.deepEqual((await admin('GET', '/admin/jobs?state=ready')).json().jobs, []);
    assert.equal((await t.app.inject({ method: 'GET', url: '/admin/jobs' })).statusCode, 401);

    const revived = await admin('POST', `/admin/jobs/${job.id}/retry`);
    assert.equal(revived.statusCode, 200);
    assert.deepEqual([revived.json().state, revived.json().attempts, revived.json().lapses], ['ready', 0, 0]);
    assert.equal(
      (await admin('POST', `/admin/jobs/${job.id}/retry`)).statusCode,
      404,
      'only a dead job can be revived',
    );
    failing = false;
    assert.equal(await worker.drain(), 1);
    assert.deepEqual((await admin('GET', '/admin/jobs')).json().jobs, []);
  });

  interface JobsPage {
    jobs: Array<{ id: number; createdAt: string; runAt: string }>;
    nextCursor: string | null;
  }
  /** Accepts scheduled SMS, each one job of kind sms.send due at `due`. */
  async function scheduleSms(count: number, due: number): Promise<void> {
    const headers = bearer(await t.tokenFor(await t.createAccount()));
    const scheduleDateTime = new Date(due).toISOString();
    for (let n = 1; n <= count; n++) {
      const payload = { recipient: `91981230000${n}`, senderName: 'HERALD', body: 'later', scheduleDateTime };
      assert.equal((await t.app.inject({ method: 'POST', url: '/sms/single', headers, payload })).statusCode, 202);
    }
  }
  const admin = (url: string) => t.app.inject({ method: 'GET', url, headers: bearer(ADMIN_TOKEN) });
  const jobsPage = async (query: string) => {
    const response = await admin(`/admin/jobs?state=ready&kind=sms.send&${query}`);
    assert.equal(response.statusCode, 200, response.body);
    return response.json() as JobsPage;
  };

  it('pages /admin/jobs newest first with a cursor; a cursor it did not give is a 400', async () => {
    await scheduleSms(3, t.clock.now() + 3_600_000);
    const first = await jobsPage('limit=2');
    assert.equal(first.jobs.length, 2);
    assert.ok(first.jobs[0].id > first.jobs[1].id, 'newest first');
    assert.equal(typeof first.nextCursor, 'string');
    const second = await jobsPage(`limit=2&cursor=${first.nextCursor}`);
    assert.deepEqual([second.jobs.length, second.nextCursor], [1, null]);
    assert.ok(second.jobs[0].id < first.jobs[1].id);
    const refused = await admin('/admin/jobs?cursor=bm90LWFuLWlk');
    assert.equal(refused.statusCode, 400);
    assert.deepEqual(
      refused.json().errors.map((e: { field: string }) => e.field),
      ['cursor'],
    );
  });

  it('shows when a scheduled job was queued (createdAt) apart from when it is due (runAt)', async () => {
    const queuedAt = t.clock.now();
    const due = queuedAt + 3_600_000;
    await scheduleSms(1, due);
    const [job] = (await jobsPage('')).jobs;
    assert.deepEqual([job.createdAt, job.runAt], [new Date(queuedAt).toISOString(), new Date(due).toISOString()]);
  });
});
