import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { enqueueMany } from '../../src/queue/queue.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

forEachDatabase((dialect) => {
  let t: TestApp;
  beforeEach(async () => {
    t = await startTestApp(dialect);
  });
  afterEach(() => t.close());

  it('reports queue depth by kind and state, and the age of the oldest due job, in /metrics', async () => {
    const now = t.clock.now();
    await enqueueMany(t.ctx.db, [
      { kind: 'sms.send', payload: 1, runAt: now - 90_000 },
      { kind: 'sms.send', payload: 2, runAt: now - 1_000 },
      { kind: 'sms.send', payload: 3, runAt: now + 60_000 },
      { kind: 'email.send', payload: 4, runAt: now - 5_000 },
    ]);
    const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    assert.match(metrics, /^herald_queue_jobs\{kind="sms\.send",state="ready"\} 3$/m);
    assert.match(metrics, /^herald_queue_jobs\{kind="email\.send",state="ready"\} 1$/m);
    assert.match(metrics, /^herald_queue_oldest_ready_age_seconds\{kind="sms\.send"\} 90$/m);
    assert.match(metrics, /^herald_queue_oldest_ready_age_seconds\{kind="email\.send"\} 5$/m);
  });
});
