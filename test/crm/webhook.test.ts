import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../src/clock.ts';
import { CONTACT_BATCH_KIND } from '../../src/crm/batches.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import { buildContact, startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';

forEachDatabase((dialect) => {
  let crm: ApiTest;
  let alice: ApiClient;
  let receiver: Receiver;
  beforeEach(async () => {
    // Standard Webhooks verifiers check webhook-timestamp against the real time (±5 min).
    crm = await startApiTest(dialect, { clock: new ManualClock(Date.now()) });
    alice = await crm.client();
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await receiver.close();
    await crm.close();
  });

  const secret = async () => (await alice.get('/webhooks/secret')).json().secret as string;

  it('posts one signed contacts.batch event per applied batch, with the counts and contact ids', async () => {
    const existing = buildContact();
    const unchanged = buildContact();
    const [updatedId, skippedId] = (await alice.upsert([existing, unchanged])).inserted.contactIds;
    crm.clock.advance(1_000);

    const accepted = await alice.postBatch({
      createUpdateContacts: [{ ...existing, emailOptIn: true }, unchanged, buildContact(), buildContact()],
      webhookUrl: receiver.url,
    });
    assert.equal(accepted.statusCode, 202);
    await crm.drain();

    assert.equal(receiver.received.length, 1);
    const [post] = receiver.received;
    const payload = new Webhook(await secret()).verify(post.body, post.headers as Record<string, string>) as {
      type: string;
      timestamp: string;
      data: Record<string, unknown>;
    };
    const status = (await alice.get(`/contacts/batch/${accepted.json().data.BatchId}`)).json();
    assert.equal(payload.type, 'contacts.batch');
    assert.equal(payload.timestamp, new Date(crm.clock.now()).toISOString());
    assert.deepEqual(payload.data, status);
    assert.equal(status.inserted.count, 2);
    assert.deepEqual(status.updated, { count: 1, contactIds: [updatedId] });
    assert.deepEqual(status.skipped, { count: 1, contactIds: [skippedId] });

    // Draining again posts nothing more: one post per batch.
    await crm.drain();
    assert.equal(receiver.received.length, 1);
  });

  it('posts a Failed batch too, with its reason', async () => {
    const accepted = await alice.postBatch({ createUpdateContacts: [buildContact()], webhookUrl: receiver.url });
    const batchId = accepted.json().data.BatchId;
    // A payload the handler cannot apply, on the job's last attempt: the batch fails for good.
    await crm.t.ctx.db
      .updateTable('jobs')
      .set({ max_attempts: 1, payload: JSON.stringify({ batchId, listId: 'none', contacts: 5, propertyIds: [] }) })
      .where('kind', '=', CONTACT_BATCH_KIND)
      .execute();
    await crm.drain();
    assert.equal(receiver.received.length, 1);
    const payload = new Webhook(await secret()).verify(
      receiver.received[0].body,
      receiver.received[0].headers as Record<string, string>,
    ) as { data: Record<string, unknown> };
    assert.deepEqual(payload.data, (await alice.get(`/contacts/batch/${batchId}`)).json());
    assert.equal(payload.data.status, 'Failed');
    assert.match(payload.data.error as string, /^not applied after 1 attempts: /);
  });

  it('posts nothing for a batch without webhookUrl', async () => {
    await alice.upsert([buildContact()]);
    assert.equal(receiver.received.length, 0);
  });
});
