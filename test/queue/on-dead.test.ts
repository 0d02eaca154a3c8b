import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { claimJobs, MAX_LAPSES } from '../../src/queue/queries.ts';
import { CONTACT_BATCH_KIND } from '../../src/crm/batches.ts';
import { DELIVER_KIND, emitWebhook } from '../../src/webhooks/outbox.ts';
import { buildContact, startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';

// The queue's accounting as each kind meets it: snoozes spend no attempt, and a job that
// dies leaves no domain row waiting for it (onDead).
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let warnings: Array<{ level: number; msg: string; jobId?: number; kind?: string; accountId?: string | null }>;
  beforeEach(async () => {
    warnings = [];
    const stream = { write: (line: string) => void warnings.push(JSON.parse(line)) };
    api = await startApiTest(dialect, { logger: { level: 'warn', stream } });
    alice = await api.client();
  });
  const deadLines = () =>
    warnings.filter((l) => l.msg.startsWith('job dead')).map((l) => [l.level, l.jobId, l.kind, l.accountId, l.msg]);
  afterEach(() => api.close());

  const db = () => api.t.ctx.db;
  const claimLapsed = (kind: string) =>
    claimJobs(db(), dialect, { kind, limit: 1, workerId: 'crashing-worker', now: api.clock.now(), leaseMs: 0 });

  it('retries a webhook post on the delivery’s own schedule without spending the job’s attempts', async () => {
    const deliveryId = await emitWebhook(db(), api.clock, {
      accountId: alice.account.row.id,
      url: 'http://127.0.0.1:9/hooks',
      type: 'test.event',
      data: {},
    });
    for (let post = 1; post <= 3; post++) {
      await api.drain();
      const delivery = await db()
        .selectFrom('webhook_deliveries')
        .selectAll()
        .where('id', '=', deliveryId)
        .executeTakeFirstOrThrow();
      const job = await db().selectFrom('jobs').selectAll().executeTakeFirstOrThrow();
      assert.deepEqual(
        [delivery.status, delivery.attempts, job.state, job.attempts, job.run_at],
        ['pending', post, 'ready', 0, delivery.next_attempt_at],
      );
      api.clock.set(job.run_at);
    }
  });

  it('fails the webhook delivery of a job whose lease lapsed five times', async () => {
    const deliveryId = await emitWebhook(db(), api.clock, {
      accountId: alice.account.row.id,
      url: 'http://127.0.0.1:9/hooks',
      type: 'test.event',
      data: {},
    });
    for (let lapse = 1; lapse <= MAX_LAPSES; lapse++) {
      assert.equal((await claimLapsed(DELIVER_KIND)).length, 1, `claim ${lapse}`);
      assert.equal(await api.drain(), 0, 'rescued, and not rerun before its backoff');
      const job = await db().selectFrom('jobs').select(['state', 'run_at']).executeTakeFirstOrThrow();
      if (lapse < MAX_LAPSES) api.clock.set(job.run_at);
      else assert.equal(job.state, 'dead');
    }
    const delivery = await db()
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('id', '=', deliveryId)
      .executeTakeFirstOrThrow();
    assert.equal(delivery.status, 'failed');
    assert.match(delivery.last_error!, /its job died: the lease lapsed/);
    assert.equal(delivery.next_attempt_at, null);
    const { id: jobId } = await db().selectFrom('jobs').select('id').executeTakeFirstOrThrow();
    const accountId = alice.account.row.id;
    const why = `its lease lapsed ${MAX_LAPSES} times (it keeps killing or hanging its worker)`;
    assert.deepEqual(deadLines(), [
      [50, jobId, DELIVER_KIND, accountId, `job dead: ${why}; POST /admin/jobs/${jobId}/retry runs it again`],
    ]);
  });

  it('warns of a failed attempt the queue tries again, and errs at the last one', async () => {
    const batchId = (await alice.postBatch({ createUpdateContacts: [buildContact()] })).json().data.BatchId;
    await db()
      .updateTable('jobs')
      .set({ max_attempts: 2, payload: JSON.stringify({ batchId, listId: 'none', contacts: 5, propertyIds: [] }) })
      .where('kind', '=', CONTACT_BATCH_KIND)
      .execute();
    const failures = () =>
      warnings.filter((l) => l.msg === 'job failed').map((l) => [l.level, l.kind, 'retryInMs' in l]);
    await api.drain();
    assert.deepEqual(failures(), [[40, CONTACT_BATCH_KIND, true]]);
    const job = await db().selectFrom('jobs').select('run_at').executeTakeFirstOrThrow();
    api.clock.set(job.run_at);
    await api.drain();
    assert.deepEqual(failures(), [
      [40, CONTACT_BATCH_KIND, true],
      [50, CONTACT_BATCH_KIND, false],
    ]);
  });

  it('marks Failed, and posts that, a contact batch whose job fails its last attempt', async () => {
    const batchId = (
      await alice.postBatch({ createUpdateContacts: [buildContact()], webhookUrl: 'http://127.0.0.1:9/hooks' })
    ).json().data.BatchId;
    // A payload the handler cannot apply (entries that are not a list) fails the run with an error.
    await db()
      .updateTable('jobs')
      .set({ max_attempts: 1, payload: JSON.stringify({ batchId, listId: 'none', contacts: 5, propertyIds: [] }) })
      .where('kind', '=', CONTACT_BATCH_KIND)
      .execute();
    await api.drain();
    const job = await db()
      .selectFrom('jobs')
      .select(['id', 'state', 'attempts'])
      .where('kind', '=', CONTACT_BATCH_KIND)
      .executeTakeFirstOrThrow();
    assert.deepEqual([job.state, job.attempts], ['dead', 1]);
    const dead = `job dead: its last attempt (1 of 1) failed; POST /admin/jobs/${job.id}/retry runs it again`;
    assert.deepEqual(deadLines(), [[50, job.id, CONTACT_BATCH_KIND, alice.account.row.id, dead]]);
    const status = (await alice.get(`/contacts/batch/${batchId}`)).json();
    assert.equal(status.status, 'Failed');
    assert.match(status.error, /^not applied after 1 attempts: /);
    const deliveries = await db().selectFrom('webhook_deliveries').selectAll().execute();
    assert.deepEqual(
      deliveries.map((row) => [row.type, row.status, JSON.parse(row.payload).data.status]),
      [['contacts.batch', 'pending', 'Failed']],
    );
  });
});
