import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import { randomUUID } from 'node:crypto';
import { CONTACT_BATCH_KIND, packEntries, recordBatch } from '../../src/crm/batches.ts';
import type { AppError } from '../../src/errors.ts';
import { bearer } from '../support/app.ts';
import { claimJobs, rescueExpiredLeases } from '../../src/queue/queries.ts';
import { buildContact, startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

forEachDatabase((dialect) => {
  let crm: ApiTest;
  let alice: ApiClient;
  beforeEach(async () => {
    crm = await startApiTest(dialect);
    alice = await crm.client();
  });
  afterEach(() => crm.close());

  const count = async (table: 'contacts' | 'contact_batches' | 'jobs') =>
    Number(
      (
        await crm.t.ctx.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  const assertNothingChanged = async () => {
    assert.equal(await count('contacts'), 0);
    assert.equal(await count('contact_batches'), 0);
    assert.equal(await count('jobs'), 0);
  };

  it('accepts a batch with 202 and exactly the body of SPEC §2.6, then applies it', async () => {
    const response = await alice.postBatch({ createUpdateContacts: [buildContact()] });
    assert.equal(response.statusCode, 202);
    const body = response.json();
    assert.match(body.data.BatchId, UUID);
    assert.deepEqual(body, {
      status: 'Success',
      message: 'The contact batch was accepted; its contacts will be created or updated shortly.',
      data: {
        BatchId: body.data.BatchId,
        Processed: null,
        ContactId: null,
        InvalidProperties: [],
        InvalidContactIds: [],
      },
    });

    const queued = (await alice.get(`/contacts/batch/${body.data.BatchId}`)).json();
    assert.deepEqual([queued.status, queued.contacts, queued.inserted, queued.completedAt], ['Queued', 1, null, null]);
    assert.equal(await crm.drain(), 1);
    const done = (await alice.get(`/contacts/batch/${body.data.BatchId}`)).json();
    assert.equal(done.status, 'Completed');
    assert.equal(done.inserted.count, 1);
    assert.deepEqual(
      [done.updated, done.skipped],
      [
        { count: 0, contactIds: [] },
        { count: 0, contactIds: [] },
      ],
    );
    assert.equal(done.completedAt, new Date(crm.clock.now()).toISOString());
  });

  it('reads as Processing while a worker holds its job, and as Queued again if that worker dies', async () => {
    const batchId = (await alice.postBatch({ createUpdateContacts: [buildContact()] })).json().data.BatchId;
    // A lease of 0 ms has lapsed by the database's clock as soon as it is taken.
    await claimJobs(crm.t.ctx.db, dialect, {
      kind: CONTACT_BATCH_KIND,
      limit: 1,
      workerId: 'busy-worker',
      now: crm.clock.now(),
      leaseMs: 0,
    });
    assert.equal((await alice.get(`/contacts/batch/${batchId}`)).json().status, 'Processing');
    await rescueExpiredLeases(crm.t.ctx.db, dialect, crm.clock.now());
    assert.equal((await alice.get(`/contacts/batch/${batchId}`)).json().status, 'Queued');
    crm.clock.advance(60_000);
    assert.equal(await crm.drain(), 1);
    assert.equal((await alice.get(`/contacts/batch/${batchId}`)).json().status, 'Completed');
  });

  it('takes application/json-patch+json as the spec samples send it, and refuses other types with 415', async () => {
    const patch = await alice.postBatch(
      { createUpdateContacts: [buildContact()] },
      { contentType: 'application/json-patch+json' },
    );
    assert.equal(patch.statusCode, 202);
    const text = await alice.postBatch({ createUpdateContacts: [buildContact()] }, { contentType: 'text/plain' });
    assert.equal(text.statusCode, 415);
  });

  it('lists every problem of every contact by field path, with 400, and changes nothing', async () => {
    const response = await alice.postBatch({
      createUpdateContacts: [
        { mobileOptIn: true },
        { email: 'not-an-email' },
        { mobileCountryCode: '+91', mobileNumber: '98-1234' },
        { mobileCountryCode: '91', email: 'ok@example.com' },
        { mobileCountryCode: '91', mobileNumber: '12345' },
        { mobileCountryCode: 91, mobileNumber: 1123456789 },
        { mobileCountryCode: '999', mobileNumber: '9812345678' },
        { email: 'ok@example.com', mobileOptIn: 'yes', emailOptIn: 1 },
        { email: 'ok@example.com', propertyfields: [{ propertyvalue: 'orphan' }] },
        buildContact(),
      ],
    });
    assert.equal(response.statusCode, 400);
    const body = response.json();
    assert.equal(body.status, 'Failure');
    assert.deepEqual(body.errors, [
      {
        field: 'createUpdateContacts[0]',
        message: 'needs at least one of email, mobileCountryCode with mobileNumber, or contactId',
      },
      { field: 'createUpdateContacts[1].email', message: 'must be an email address' },
      { field: 'createUpdateContacts[2].mobileCountryCode', message: 'must be 1 to 3 digits' },
      { field: 'createUpdateContacts[2].mobileNumber', message: 'must be digits only, at most 17' },
      { field: 'createUpdateContacts[3].mobileNumber', message: 'is required with mobileCountryCode' },
      { field: 'createUpdateContacts[4].mobileNumber', message: 'is not a valid mobile number for country code +91' },
      // A Delhi landline: a valid number, but not a mobile one.
      { field: 'createUpdateContacts[5].mobileNumber', message: 'is not a valid mobile number for country code +91' },
      { field: 'createUpdateContacts[6].mobileNumber', message: 'is not a valid mobile number for country code +999' },
      { field: 'createUpdateContacts[7].mobileOptIn', message: 'must be true, false or blank' },
      { field: 'createUpdateContacts[7].emailOptIn', message: 'must be true, false or blank' },
      { field: 'createUpdateContacts[8].propertyfields[0]', message: 'needs a propertyid or a propertyname' },
    ]);
    assert.deepEqual(body.data, { InvalidProperties: [], InvalidContactIds: [] });
    await assertNothingChanged();
  });

  it('answers a wrong type, an unknown field or a bad webhookUrl with 400, with the batch’s arrays', async () => {
    const cases: Array<[unknown, string]> = [
      [
        {
          createUpdateContacts: [{ email: 'a@example.com', propertyfields: [{ propertyname: 'x', propertyvalue: 7 }] }],
        },
        'createUpdateContacts[0].propertyfields[0].propertyvalue',
      ],
      [{ createUpdateContacts: [{ email: 'a@example.com', contactId: 'seven' }] }, 'createUpdateContacts[0].contactId'],
      [
        { createUpdateContacts: [{ email: 'a@example.com', mobileNo: '919812345678' }] },
        'createUpdateContacts[0].mobileNo',
      ],
      [{ createUpdateContacts: [{ email: 'a@example.com' }], listId: 'not-a-uuid' }, 'listId'],
      [{ createUpdateContacts: [{ email: 'a@example.com' }], webhookUrl: 'ftp://example.com/hook' }, 'webhookUrl'],
      [{}, 'createUpdateContacts'],
      [{ createUpdateContacts: [] }, 'createUpdateContacts'],
    ];
    for (const [body, field] of cases) {
      const response = await alice.postBatch(body);
      assert.equal(response.statusCode, 400, JSON.stringify(body));
      assert.deepEqual(
        response.json().errors.map((e: { field: string }) => e.field),
        [field],
        JSON.stringify(body),
      );
      assert.deepEqual(response.json().data, { InvalidProperties: [], InvalidContactIds: [] }, JSON.stringify(body));
    }
    const notJson = await crm.t.app.inject({
      method: 'POST',
      url: '/contacts/batch',
      headers: { ...bearer(alice.token), 'content-type': 'application/json' },
      payload: '{"createUpdateContacts": [',
    });
    assert.equal(notJson.statusCode, 400);
    assert.deepEqual(notJson.json().data, { InvalidProperties: [], InvalidContactIds: [] }, 'a body that is not JSON');
    await assertNothingChanged();
  });

  it('refuses 1001 contacts with 400 and takes 1000', async () => {
    const contacts = Array.from({ length: 1001 }, () => buildContact());
    const tooMany = await alice.postBatch({ createUpdateContacts: contacts });
    assert.equal(tooMany.statusCode, 400);
    assert.deepEqual(tooMany.json().errors, [
      { field: 'createUpdateContacts', message: 'must hold at most 1000 items' },
    ]);
    await assertNothingChanged();
    const result = await alice.upsert(contacts.slice(0, 1000));
    assert.equal(result.inserted.count, 1000);
  });

  it('rejects the whole batch for one bad contact among 999 good ones, and applies it once fixed', async () => {
    const contacts = Array.from({ length: 1000 }, () => buildContact());
    const bad = [...contacts];
    bad[517] = { ...contacts[517], email: 'ada at example.com' };
    const response = await alice.postBatch({ createUpdateContacts: bad });
    assert.equal(response.statusCode, 400);
    assert.deepEqual(response.json().errors, [
      { field: 'createUpdateContacts[517].email', message: 'must be an email address' },
    ]);
    await assertNothingChanged();
    assert.equal((await alice.upsert(contacts)).inserted.count, 1000);
    assert.equal(await count('contacts'), 1000);
  });

  it('lists unknown property ids and names in data.InvalidProperties with 422', async () => {
    const known = await alice.createProperty('firstName');
    const unknownId = '6f1c2a4e-0000-4000-8000-000000000001';
    const response = await alice.postBatch({
      createUpdateContacts: [
        buildContact({
          propertyfields: [
            { propertyid: known, propertyvalue: 'Ada' },
            { propertyname: 'FIRSTNAME', propertyvalue: 'Ada' },
          ],
        }),
        buildContact({
          propertyfields: [
            { propertyid: unknownId, propertyvalue: 'x' },
            { propertyname: 'nickname', propertyvalue: 'y' },
          ],
        }),
        buildContact({ propertyfields: [{ propertyname: 'nickname', propertyvalue: 'z' }] }),
      ],
    });
    assert.equal(response.statusCode, 422);
    const body = response.json();
    assert.deepEqual(body.data, { InvalidProperties: [unknownId, 'nickname'], InvalidContactIds: [] });
    assert.deepEqual(body.errors, [
      { field: 'createUpdateContacts[1].propertyfields[0].propertyid', message: 'is not a property of this account' },
      { field: 'createUpdateContacts[1].propertyfields[1].propertyname', message: 'is not a property of this account' },
      { field: 'createUpdateContacts[2].propertyfields[0].propertyname', message: 'is not a property of this account' },
    ]);
    await assertNothingChanged();
  });

  it("numbers contacts per account: each account's first contact is 1", async () => {
    const bob = await crm.client();
    assert.deepEqual((await alice.upsert([buildContact(), buildContact()])).inserted.contactIds, [1, 2]);
    assert.deepEqual((await bob.upsert([buildContact()])).inserted.contactIds, [1]);
    assert.deepEqual((await alice.upsert([buildContact()])).inserted.contactIds, [3]);
  });

  it(
    "takes a contactId another account holds as its own: no 422 that would reveal it, and the other's contact " +
      'untouched',
    async () => {
      const bob = await crm.client();
      const bobsList = await bob.createList('Bob’s');
      await bob.upsert([{ contactId: 5000, email: 'bob@example.com' }], { listId: bobsList });
      const bobsBefore = await bob.contact(5000);
      const alicesList = await alice.createList('Alice’s');
      const taken = await alice.postBatch({
        createUpdateContacts: [{ contactId: 5000, email: 'alice@example.com' }],
        listId: alicesList,
      });
      const free = await alice.postBatch({ createUpdateContacts: [{ contactId: 6000, email: 'alice2@example.com' }] });
      assert.deepEqual([taken.statusCode, free.statusCode], [202, 202]);
      assert.deepEqual(taken.json().data.InvalidContactIds, []);
      await crm.drain();
      assert.deepEqual((await alice.get(`/contacts/batch/${taken.json().data.BatchId}`)).json().inserted, {
        count: 1,
        contactIds: [5000],
      });
      const alices = await alice.contact(5000);
      assert.equal(alices.email, 'alice@example.com');
      assert.deepEqual(alices.listIds.slice(1), [alicesList]);
      assert.deepEqual(await bob.contact(5000), bobsBefore);
      assert.deepEqual((await bob.get(`/lists/${bobsList}/contacts`)).json().contacts, [bobsBefore]);
      assert.deepEqual((await alice.get(`/lists/${alicesList}/contacts`)).json().contacts, [alices]);
      // An update by that id reaches the account's own contact only.
      await bob.upsert([{ contactId: 5000, emailOptIn: true }]);
      assert.equal((await alice.contact(5000)).emailOptIn, false);
      assert.equal((await bob.contact(5000)).emailOptIn, true);
    },
  );

  it('answers an unknown listId, or another account’s, with 422', async () => {
    const bob = await crm.client();
    const bobsList = await bob.createList('Bob’s');
    for (const listId of ['6f1c2a4e-0000-4000-8000-000000000002', bobsList]) {
      const response = await alice.postBatch({ createUpdateContacts: [buildContact()], listId });
      assert.equal(response.statusCode, 422);
      assert.deepEqual(response.json().errors, [{ field: 'listId', message: 'is not a list of this account' }]);
    }
    assert.equal(await count('contact_batches'), 0);
  });

  it('refuses a batch whose list was deleted after its checks found it, with the same 422', async () => {
    const list = await alice.createList('Leaving');
    const batchId = randomUUID();
    const batch = {
      batchId,
      accountId: alice.account.row.id,
      listId: list,
      webhookUrl: null,
      job: packEntries(batchId, list, []),
      acceptedAt: crm.clock.now(),
    };
    const deleted = await crm.t.app.inject({ method: 'DELETE', url: `/lists/${list}`, headers: bearer(alice.token) });
    assert.equal(deleted.statusCode, 204);
    await assert.rejects(crm.t.ctx.database.call(recordBatch, { claim: undefined, args: batch }), (error: AppError) => {
      assert.equal(error.statusCode, 422);
      assert.deepEqual(error.errors, [{ field: 'listId', message: 'is not a list of this account' }]);
      return true;
    });
    assert.equal(await count('contact_batches'), 0);
  });

  it('replays a batch sent again with its Idempotency-Key and queues it once', async () => {
    const body = { createUpdateContacts: [buildContact()] };
    const first = await alice.postBatch(body, { idempotencyKey: 'sync-42' });
    const again = await alice.postBatch(body, { idempotencyKey: 'sync-42' });
    assert.equal(again.statusCode, 202);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(again.json(), first.json());
    assert.equal(await count('contact_batches'), 1);
    assert.equal(await crm.drain(), 1);
  });

  it('accepts one of two batches sent at once with one Idempotency-Key, and replays it to the other', async () => {
    const body = { createUpdateContacts: [buildContact()] };
    const responses = await Promise.all([
      alice.postBatch(body, { idempotencyKey: 'race' }),
      alice.postBatch(body, { idempotencyKey: 'race' }),
    ]);
    assert.deepEqual(
      responses.map((r) => r.statusCode),
      [202, 202],
    );
    assert.equal(responses[0].json().data.BatchId, responses[1].json().data.BatchId);
    assert.equal(responses.filter((r) => r.headers['idempotent-replayed'] === 'true').length, 1);
    assert.equal(await count('contact_batches'), 1);
    assert.equal(await count('jobs'), 1);
  });

  it('applies an account’s batches in the order accepted, though the first one’s worker died', async () => {
    const contact = (emailOptIn: boolean) => ({ createUpdateContacts: [{ email: 'ada@example.com', emailOptIn }] });
    const first = (await alice.postBatch(contact(true))).json().data.BatchId;
    // Its worker dies with it: the rescue sets its job back, behind the next batch.
    await claimJobs(crm.t.ctx.db, dialect, {
      kind: CONTACT_BATCH_KIND,
      limit: 1,
      workerId: 'dying-worker',
      now: crm.clock.now(),
      leaseMs: 0,
    });
    await rescueExpiredLeases(crm.t.ctx.db, dialect, crm.clock.now());
    crm.clock.advance(1);
    const opted = (await alice.postBatch(contact(false))).json().data.BatchId;
    await crm.drain();
    const status = async (batchId: string) => (await alice.get(`/contacts/batch/${batchId}`)).json().status;
    assert.deepEqual([await status(first), await status(opted)], ['Queued', 'Queued'], 'the opt-out waits its turn');

    crm.clock.advance(60_000);
    await crm.drain();
    assert.deepEqual([await status(first), await status(opted)], ['Completed', 'Queued']);
    crm.clock.advance(1_000);
    await crm.drain();
    assert.equal(await status(opted), 'Completed', 'then the later one, a second after');
    const [id] = (await alice.get(`/contacts/batch/${first}`)).json().inserted.contactIds;
    assert.equal((await alice.get(`/contacts/${id}`)).json().emailOptIn, false, 'the later batch’s opt-out stands');
  });

  it('applies an account’s batches in the order accepted across API processes whose clocks differ', async () => {
    const contact = (emailOptIn: boolean) => ({ createUpdateContacts: [{ email: 'ada@example.com', emailOptIn }] });
    const first = (await alice.postBatch(contact(true))).json().data.BatchId;
    // The next request, after the first's 202, reaches a process whose clock is 5 s behind.
    crm.clock.advance(-5_000);
    const opted = (await alice.postBatch(contact(false))).json().data.BatchId;
    crm.clock.advance(5_000);
    await crm.drain();
    crm.clock.advance(1_000);
    await crm.drain();
    const [made, changed] = [
      (await alice.get(`/contacts/batch/${first}`)).json(),
      (await alice.get(`/contacts/batch/${opted}`)).json(),
    ];
    assert.deepEqual([made.status, changed.status], ['Completed', 'Completed']);
    assert.deepEqual(
      [made.inserted.contactIds.length, changed.updated.contactIds],
      [1, made.inserted.contactIds],
      'the first accepted made the contact, the second changed it',
    );
    const id = made.inserted.contactIds[0];
    assert.equal((await alice.get(`/contacts/${id}`)).json().emailOptIn, false, 'the later batch’s opt-out stands');
  });

  it('says when a queued batch is failing: its failed attempts, last error and next try', async () => {
    const accepted = await alice.postBatch({ createUpdateContacts: [buildContact()] });
    // A payload the handler cannot read: every run of the job throws.
    await crm.t.ctx.db.updateTable('jobs').set({ payload: '{}' }).where('kind', '=', CONTACT_BATCH_KIND).execute();
    await crm.drain();
    const status = (await alice.get(`/contacts/batch/${accepted.json().data.BatchId}`)).json();
    assert.equal(status.status, 'Queued');
    assert.equal(status.retrying.failedAttempts, 1);
    assert.equal(status.retrying.maxAttempts, 10);
    assert.ok(status.retrying.lastError.length > 0);
    assert.ok(Date.parse(status.retrying.nextAttemptAt) > crm.t.clock.now());
  });
});
