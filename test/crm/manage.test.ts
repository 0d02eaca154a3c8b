import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { bearer } from '../support/app.ts';
import { forEachDatabase } from '../support/databases.ts';
import { buildContact, startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { buildBatch } from '../email/support.ts';

// Contacts and lists changed and deleted one at a time (ARCHITECTURE.md, "Data rights and management").
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let bob: ApiClient;
  beforeEach(async () => {
    api = await startApiTest(dialect, {
      clock: new ManualClock(Date.UTC(2026, 2, 10, 12)),
      env: { SMS_TRANSPORT: 'sandbox:', EMAIL_TRANSPORT: 'sandbox:' },
    });
    alice = await api.client();
    bob = await api.client();
  });
  afterEach(() => api.close());

  const call = (client: ApiClient, method: 'PATCH' | 'DELETE' | 'POST', url: string, payload?: object) =>
    api.t.app.inject({ method, url, headers: bearer(client.token), ...(payload ? { payload } : {}) });
  const allContactsOf = async (client: ApiClient) =>
    ((await client.get('/lists')).json().lists as Array<{ listId: string }>)[0].listId;
  const members = async (client: ApiClient, listId: string) =>
    ((await client.get(`/lists/${listId}/contacts`)).json().contacts as Array<{ contactId: number }>).map(
      (c) => c.contactId,
    );

  it('changes only the fields given, by the batch rules, and answers the contact as GET shows it', async () => {
    const firstName = await alice.createProperty('firstName');
    const city = await alice.createProperty('city');
    const [id] = (
      await alice.upsert([
        buildContact({
          email: 'ada@example.com',
          mobileCountryCode: '44',
          mobileNumber: '7911123456',
          emailOptIn: true,
          propertyfields: [
            { propertyid: firstName, propertyvalue: 'Ada' },
            { propertyid: city, propertyvalue: 'London' },
          ],
        }),
      ])
    ).inserted.contactIds;
    api.clock.advance(1000);

    const patched = await call(alice, 'PATCH', `/contacts/${id}`, {
      mobileCountryCode: 44,
      mobileNumber: '07911123457',
      mobileOptIn: true,
      emailOptIn: '',
      propertyfields: [{ propertyname: 'FIRSTNAME', propertyvalue: 'Augusta' }],
    });
    assert.equal(patched.statusCode, 200, patched.body);
    const body = patched.json();
    assert.deepEqual(body, (await alice.get(`/contacts/${id}`)).json());
    assert.deepEqual(
      [body.email, body.mobileCountryCode, body.mobileNumber, body.mobileOptIn, body.emailOptIn],
      ['ada@example.com', '44', '7911123457', true, true],
      'the email and a blank opt-in keep their values; the number is stored as the batch stores it',
    );
    assert.deepEqual(
      Object.fromEntries(
        body.propertyfields.map((p: { propertyname: string; propertyvalue: string }) => [
          p.propertyname,
          p.propertyvalue,
        ]),
      ),
      { firstName: 'Augusta', city: 'London' },
    );
    assert.equal(body.updatedAt, new Date(api.clock.now()).toISOString());

    // Nothing given: nothing changes, updatedAt included.
    api.clock.advance(1000);
    const same = await call(alice, 'PATCH', `/contacts/${id}`, {});
    assert.equal(same.statusCode, 200);
    assert.deepEqual(same.json(), body);
  });

  it('lets two contacts share an email as the batch does; the batch still matches the oldest', async () => {
    const [first, second] = (await alice.upsert([{ email: 'one@example.com' }, { email: 'two@example.com' }])).inserted
      .contactIds;
    const shared = await call(alice, 'PATCH', `/contacts/${second}`, { email: 'ONE@example.com' });
    assert.equal(shared.statusCode, 200, shared.body);
    assert.equal(shared.json().email, 'one@example.com');
    const matched = await alice.upsert([{ email: 'one@example.com', emailOptIn: true }]);
    assert.deepEqual(matched.updated.contactIds, [first]);
  });

  it('refuses bad input with every problem by field name, and writes nothing', async () => {
    const [id] = (await alice.upsert([{ email: 'ada@example.com' }])).inserted.contactIds;
    const before = await alice.contact(id);
    const bad = await call(alice, 'PATCH', `/contacts/${id}`, {
      email: 'not an address',
      mobileCountryCode: '44',
      mobileOptIn: 'yes',
    });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().status, 'Failure');
    assert.deepEqual(
      bad
        .json()
        .errors.map((e: { field: string }) => e.field)
        .sort(),
      ['email', 'mobileNumber', 'mobileOptIn'],
    );
    const unknownProperty = await call(alice, 'PATCH', `/contacts/${id}`, {
      emailOptIn: true,
      propertyfields: [{ propertyname: 'nope', propertyvalue: 'x' }],
    });
    assert.equal(unknownProperty.statusCode, 422);
    assert.deepEqual(unknownProperty.json().errors, [
      { field: 'propertyfields[0].propertyname', message: 'is not a property of this account' },
    ]);
    assert.equal((await call(alice, 'PATCH', `/contacts/${id}`, { contactId: 7 })).statusCode, 400);
    assert.equal((await call(alice, 'PATCH', `/contacts/${id}`, { email: 7 })).statusCode, 400);
    assert.deepEqual(await alice.contact(id), before);
    assert.equal((await call(alice, 'PATCH', '/contacts/999999', { emailOptIn: true })).statusCode, 404);
    assert.equal((await alice.get('/contacts/999999')).statusCode, 404, 'a PATCH creates no contact');
  });

  it("keeps accounts apart: another account's contact and lists answer 404 and do not change", async () => {
    const list = await alice.createList('Mine');
    const [id] = (await alice.upsert([buildContact()], { listId: list })).inserted.contactIds;
    const before = await alice.contact(id);
    assert.equal((await call(bob, 'PATCH', `/contacts/${id}`, { emailOptIn: true })).statusCode, 404);
    assert.equal((await call(bob, 'DELETE', `/contacts/${id}`)).statusCode, 404);
    assert.equal((await call(bob, 'PATCH', `/lists/${list}`, { name: 'Theirs' })).statusCode, 404);
    assert.equal((await call(bob, 'DELETE', `/lists/${list}`)).statusCode, 404);
    assert.equal((await call(bob, 'DELETE', `/lists/${list}/contacts/${id}`)).statusCode, 404);
    assert.equal((await call(bob, 'POST', `/lists/${list}/contacts`, { contactIds: [id] })).statusCode, 404);
    // Bob's own list, Alice's contact id: not Bob's contact.
    const bobs = await bob.createList('Bob');
    const foreign = await call(bob, 'POST', `/lists/${bobs}/contacts`, { contactIds: [id] });
    assert.equal(foreign.statusCode, 422);
    assert.deepEqual(await members(bob, bobs), []);
    assert.deepEqual(await alice.contact(id), before);
    assert.deepEqual(await members(alice, list), [id]);
    assert.equal(((await alice.get('/lists')).json().lists as unknown[]).length, 2);
  });

  it('deletes a contact: 204, off its lists, its messages kept, its missing consent kept as suppressions', async () => {
    const list = await alice.createList('Customers');
    const [consenting, unconsenting] = (
      await alice.upsert(
        [
          { email: 'yes@example.com', mobileCountryCode: '91', mobileNumber: '9812345601', mobileOptIn: true },
          { email: 'no@example.com', mobileCountryCode: '91', mobileNumber: '9812345602', emailOptIn: true },
        ],
        { listId: list },
      )
    ).inserted.contactIds;
    const sent = await alice.accept('/sms/batch', { senderName: 'HERALD', body: 'Hello', listId: [list] });
    await api.drain();

    assert.equal((await call(alice, 'DELETE', `/contacts/${consenting}`)).statusCode, 204);
    assert.equal((await call(alice, 'DELETE', `/contacts/${consenting}`)).statusCode, 404);
    assert.equal((await alice.get(`/contacts/${consenting}`)).statusCode, 404);
    assert.equal((await alice.get(`/contacts/${consenting}/messages`)).statusCode, 404);
    assert.deepEqual(await members(alice, list), [unconsenting]);
    const read = await alice.get(`/sms/${sent}`);
    assert.equal(read.statusCode, 200);
    assert.deepEqual(read.json().totals, { Delivered: 1, NotSent: 1 }, "the deleted contact's message stays");
    assert.deepEqual(
      read.json().recipients.map((r: { recipient: string; status: string }) => [r.recipient, r.status]),
      [
        ['919812345601', 'Delivered'],
        ['919812345602', 'NotSent'],
      ],
    );

    assert.equal((await call(alice, 'DELETE', `/contacts/${unconsenting}`)).statusCode, 204);
    const suppressed = async (channel: 'sms' | 'email') =>
      ((await alice.get(`/${channel}/suppressions`)).json().suppressions as Array<Record<string, string>>).map((s) => [
        s.number ?? s.email ?? s.address,
        s.reason,
      ]);
    // Each contact consented on one channel: the other's identifier is suppressed, this one's not.
    assert.deepEqual(await suppressed('sms'), [['919812345602', 'contact deleted without consent']]);
    assert.deepEqual(await suppressed('email'), [['yes@example.com', 'contact deleted without consent']]);

    // A later send to the number, by its own recipients, is not sent.
    const later = await alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'Hello again',
      recipients: [{ mobileNo: '919812345602' }],
    });
    await api.drain();
    assert.deepEqual((await alice.get(`/sms/${later}`)).json().totals, { NotSent: 1 });
  });

  it('keeps a deleted contact without email consent suppressed: a later email to it is Dropped', async () => {
    const [id] = (await alice.upsert([{ email: 'gone@example.com', emailOptIn: false }])).inserted.contactIds;
    assert.equal((await call(alice, 'DELETE', `/contacts/${id}`)).statusCode, 204);
    const batchId = await alice.accept('/email/batch', buildBatch({}, { recipients: [{ to: 'Gone@example.com' }] }));
    await api.drain();
    assert.deepEqual((await alice.get(`/email/batch/${batchId}`)).json().totals, { Dropped: 1 });
    // A suppression is the account's own: another account may still write to the address.
    assert.deepEqual((await bob.get('/email/suppressions')).json().suppressions, []);
  });

  it('answers a POST to a list with an Idempotency-Key once, and the same again', async () => {
    const list = await alice.createList('Keyed');
    const [id] = (await alice.upsert([buildContact()])).inserted.contactIds;
    const post = () =>
      api.t.app.inject({
        method: 'POST',
        url: `/lists/${list}/contacts`,
        headers: { ...bearer(alice.token), 'idempotency-key': 'add-1' },
        payload: { contactIds: [id] },
      });
    const first = await post();
    const again = await post();
    assert.deepEqual([first.statusCode, first.json()], [200, { listId: list, added: 1 }]);
    assert.deepEqual(
      [again.statusCode, again.json(), again.headers['idempotent-replayed']],
      [200, first.json(), 'true'],
    );
  });

  it('renames a list by the rules of POST /lists, never `All contacts`', async () => {
    const list = await alice.createList('News');
    await alice.createList('Taken');
    const renamed = await call(alice, 'PATCH', `/lists/${list}`, { name: '  Newsletter ' });
    assert.equal(renamed.statusCode, 200);
    assert.deepEqual([renamed.json().listId, renamed.json().name], [list, 'Newsletter']);
    const taken = await call(alice, 'PATCH', `/lists/${list}`, { name: 'TAKEN' });
    const takenByPost = await alice.post('/lists', { name: 'TAKEN' });
    assert.equal(taken.statusCode, 409);
    assert.deepEqual(
      [taken.json().errors, taken.json().message],
      [takenByPost.json().errors, takenByPost.json().message],
    );
    assert.equal((await call(alice, 'PATCH', `/lists/${list}`, { name: 'newsletter' })).statusCode, 200);
    assert.equal((await call(alice, 'PATCH', `/lists/${list}`, { name: ' ' })).statusCode, 400);
    assert.equal((await call(alice, 'PATCH', `/lists/${list}`, {})).statusCode, 400);
    const everyone = await allContactsOf(alice);
    assert.equal((await call(alice, 'PATCH', `/lists/${everyone}`, { name: 'Everyone' })).statusCode, 409);
    assert.equal((await call(alice, 'DELETE', `/lists/${everyone}`)).statusCode, 409);
  });

  it('adds existing contacts to a list (200, how many joined) and takes one off (204)', async () => {
    const list = await alice.createList('VIP');
    const ids = (await alice.upsert([buildContact(), buildContact(), buildContact()])).inserted.contactIds;
    const added = await call(alice, 'POST', `/lists/${list}/contacts`, { contactIds: [ids[0], ids[1], ids[0]] });
    assert.equal(added.statusCode, 200, added.body);
    assert.deepEqual(added.json(), { listId: list, added: 2 });
    const again = await call(alice, 'POST', `/lists/${list}/contacts`, { contactIds: [ids[1], ids[2]] });
    assert.deepEqual(again.json(), { listId: list, added: 1 });
    assert.deepEqual(await members(alice, list), ids);

    const unknown = await call(alice, 'POST', `/lists/${list}/contacts`, { contactIds: [ids[0], 424242, 434343] });
    assert.equal(unknown.statusCode, 422);
    assert.deepEqual(
      unknown.json().errors.map((e: { field: string }) => e.field),
      ['contactIds[1]', 'contactIds[2]'],
    );
    const fresh = await alice.createList('Fresh');
    assert.equal((await call(alice, 'POST', `/lists/${fresh}/contacts`, { contactIds: [ids[0], 99] })).statusCode, 422);
    assert.deepEqual(await members(alice, fresh), [], 'nothing added');
    assert.equal((await call(alice, 'POST', `/lists/${list}/contacts`, { contactIds: [] })).statusCode, 400);
    const tooMany = Array.from({ length: 1001 }, (_, i) => i + 1);
    assert.equal((await call(alice, 'POST', `/lists/${list}/contacts`, { contactIds: tooMany })).statusCode, 400);
    const everyone = await allContactsOf(alice);
    assert.deepEqual((await call(alice, 'POST', `/lists/${everyone}/contacts`, { contactIds: [ids[0]] })).json(), {
      listId: everyone,
      added: 0,
    });

    assert.equal((await call(alice, 'DELETE', `/lists/${list}/contacts/${ids[1]}`)).statusCode, 204);
    assert.equal((await call(alice, 'DELETE', `/lists/${list}/contacts/${ids[1]}`)).statusCode, 404);
    assert.deepEqual(await members(alice, list), [ids[0], ids[2]]);
    assert.equal((await alice.get(`/contacts/${ids[1]}`)).statusCode, 200, 'the contact stays');
    assert.equal((await call(alice, 'DELETE', `/lists/${everyone}/contacts/${ids[0]}`)).statusCode, 409);
  });

  it('deletes a list, its contacts and finished batches staying; 409 while a send or batch needs it', async () => {
    const list = await alice.createList('Spring');
    const batch = await alice.upsert([buildContact({ mobileOptIn: true })], { listId: list });
    const [id] = batch.inserted.contactIds;
    const at = new Date(api.clock.now() + 86_400_000).toISOString();
    const scheduled = await alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'Tomorrow',
      listId: [list],
      scheduleDateTime: at,
    });
    const refused = await call(alice, 'DELETE', `/lists/${list}`);
    assert.equal(refused.statusCode, 409);
    assert.match(refused.json().message, new RegExp(scheduled));

    assert.equal((await call(alice, 'DELETE', `/sms/${scheduled}`)).statusCode, 204);
    const queued = await alice.postBatch({ createUpdateContacts: [buildContact()], listId: list });
    assert.equal((await call(alice, 'DELETE', `/lists/${list}`)).statusCode, 409, 'a batch not yet applied');
    await api.drain();

    assert.equal((await call(alice, 'DELETE', `/lists/${list}`)).statusCode, 204);
    assert.equal((await call(alice, 'DELETE', `/lists/${list}`)).statusCode, 404);
    assert.equal((await alice.get(`/lists/${list}/contacts`)).statusCode, 404);
    assert.deepEqual((await alice.contact(id)).listIds, [await allContactsOf(alice)]);
    const kept = await alice.get(`/contacts/batch/${queued.json().data.BatchId}`);
    assert.equal(kept.statusCode, 200, 'a batch record outlives its list');
    assert.equal((await alice.get(`/contacts/batch/${batch.batchId}`)).json().status, 'Completed');
  });
});
