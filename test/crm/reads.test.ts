import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ADMIN_TOKEN, bearer } from '../support/app.ts';
import { forEachDatabase } from '../support/databases.ts';
import { buildContact, startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';

forEachDatabase((dialect) => {
  let crm: ApiTest;
  let alice: ApiClient;
  beforeEach(async () => {
    crm = await startApiTest(dialect);
    alice = await crm.client();
  });
  afterEach(() => crm.close());

  const allContactsOf = async (client: ApiClient) =>
    ((await client.get('/lists')).json().lists as Array<{ listId: string }>)[0].listId;

  it('gives every account an `All contacts` list from its creation, the admin API included', async () => {
    const created = await crm.t.app.inject({
      method: 'POST',
      url: '/admin/accounts',
      headers: bearer(ADMIN_TOKEN),
      payload: { userName: 'grace@example.com', password: 'correct horse battery staple' },
    });
    assert.equal(created.statusCode, 201);
    const lists = await crm.t.ctx.db
      .selectFrom('contact_lists')
      .select(['name'])
      .where('account_id', '=', created.json().accountId)
      .execute();
    assert.deepEqual(
      lists.map((l) => l.name),
      ['All contacts'],
    );
    const own = (await alice.get('/lists')).json().lists;
    assert.equal(own.length, 1);
    assert.equal(own[0].name, 'All contacts');
  });

  it('creates lists and properties (201), lists them, and refuses a name taken in any case (409)', async () => {
    const list = await alice.post('/lists', { name: 'Newsletter' });
    assert.equal(list.statusCode, 201);
    assert.deepEqual(Object.keys(list.json()), ['listId', 'name', 'createdAt']);
    assert.equal(list.json().createdAt, new Date(crm.clock.now()).toISOString());
    assert.equal((await alice.post('/lists', { name: 'NEWSLETTER' })).statusCode, 409);
    assert.equal((await alice.post('/lists', { name: 'all contacts' })).statusCode, 409);
    assert.equal((await alice.post('/lists', { name: '  ' })).statusCode, 400);
    assert.deepEqual(
      ((await alice.get('/lists')).json().lists as Array<{ name: string }>).map((l) => l.name),
      ['All contacts', 'Newsletter'],
    );

    const property = await alice.post('/contacts/properties', { propertyname: 'firstName' });
    assert.equal(property.statusCode, 201);
    assert.deepEqual(Object.keys(property.json()), ['propertyid', 'propertyname']);
    const conflict = await alice.post('/contacts/properties', { propertyname: 'FirstName' });
    assert.equal(conflict.statusCode, 409);
    assert.deepEqual(conflict.json().errors, [
      { field: 'propertyname', message: 'is already taken (names are compared case-insensitively)' },
    ]);
    assert.deepEqual((await alice.get('/contacts/properties')).json(), { properties: [property.json()] });

    // Another account has its own names.
    const bob = await crm.client();
    assert.equal((await bob.post('/contacts/properties', { propertyname: 'firstName' })).statusCode, 201);
    assert.equal((await bob.get('/contacts/properties')).json().properties.length, 1);
  });

  it('reads a contact with its opt-ins, properties, lists and updatedAt', async () => {
    const propertyid = await alice.createProperty('firstName');
    const vip = await alice.createList('VIP');
    const result = await alice.upsert(
      [
        {
          email: 'Ada@Example.com',
          mobileCountryCode: '44',
          mobileNumber: '07911123456',
          emailOptIn: true,
          propertyfields: [{ propertyid, propertyvalue: 'Ada' }],
        },
      ],
      { listId: vip },
    );
    const [id] = result.inserted.contactIds;
    const at = new Date(crm.clock.now()).toISOString();
    const contact = (await alice.get(`/contacts/${id}`)).json();
    contact.listIds.sort();
    assert.deepEqual(contact, {
      contactId: id,
      email: 'ada@example.com',
      mobileCountryCode: '44',
      mobileNumber: '7911123456',
      mobileOptIn: false,
      emailOptIn: true,
      propertyfields: [{ propertyid, propertyname: 'firstName', propertyvalue: 'Ada' }],
      listIds: [await allContactsOf(alice), vip].sort(),
      createdAt: at,
      updatedAt: at,
    });
    assert.equal((await alice.get('/contacts/999999999')).statusCode, 404);
    assert.equal((await alice.get('/contacts/abc')).statusCode, 400);
  });

  it('finds contacts by email, by mobile (country code and number) or both', async () => {
    const result = await alice.upsert([
      { email: 'ada@example.com', mobileCountryCode: '44', mobileNumber: '7911123456' },
      { email: 'ada@example.com' },
      { mobileCountryCode: '44', mobileNumber: '7911123456' },
    ]);
    const [both, emailOnly, mobileOnly] = result.inserted.contactIds;
    const ids = async (query: string) =>
      ((await alice.get(`/contacts?${query}`)).json().contacts as Array<{ contactId: number }>).map((c) => c.contactId);
    assert.deepEqual(await ids('email=ADA%40example.com'), [both, emailOnly]);
    assert.deepEqual(await ids('mobile=447911123456'), [both, mobileOnly]);
    assert.deepEqual(
      await ids('mobile=4407911123456'),
      [both, mobileOnly],
      'a trunk 0 after the country code is dropped',
    );
    assert.deepEqual(await ids('email=ada%40example.com&mobile=447911123456'), [both]);
    assert.deepEqual(await ids('email=nobody%40example.com'), []);
    assert.equal((await alice.get('/contacts')).statusCode, 400);
  });

  it('pages through a list by cursor, in contactId order', async () => {
    const list = await alice.createList('Pages');
    const result = await alice.upsert(
      Array.from({ length: 5 }, () => buildContact()),
      { listId: list },
    );
    await alice.upsert([buildContact()]); // in All contacts only
    const seen: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const response = await alice.get(`/lists/${list}/contacts?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(response.statusCode, 200);
      const body = response.json();
      assert.ok(body.contacts.length <= 2);
      seen.push(...body.contacts.map((c: { contactId: number }) => c.contactId));
      cursor = body.nextCursor;
      pages++;
    } while (cursor);
    assert.deepEqual(
      seen,
      [...result.inserted.contactIds].sort((a, b) => a - b),
    );
    assert.equal(pages, 3);
    assert.equal((await alice.get(`/lists/${await allContactsOf(alice)}/contacts`)).json().contacts.length, 6);
    assert.equal((await alice.get(`/lists/${list}/contacts?cursor=bm9wZQ`)).statusCode, 400);
    const firstCursor = (await alice.get(`/lists/${list}/contacts?limit=2`)).json().nextCursor as string;
    for (const variant of [`${firstCursor}A`, `${firstCursor}%3D`]) {
      const page = await alice.get(`/lists/${list}/contacts?limit=2&cursor=${variant}`);
      assert.equal(page.statusCode, 400, 'a cursor is taken only as given');
    }
    assert.equal((await alice.get(`/lists/${list}/contacts?limit=1001`)).statusCode, 400);
  });

  it(
    "keeps accounts apart: B cannot add to A's list, read A's " + "contacts, lists or batches, or update A's contactId",
    async () => {
      const bob = await crm.client();
      const alicesList = await alice.createList('Mine');
      const contact = buildContact({ propertyfields: [] });
      const accepted = await alice.postBatch({ createUpdateContacts: [contact], listId: alicesList });
      await crm.drain();
      const batchId = accepted.json().data.BatchId;
      const alices = (await alice.get(`/contacts/batch/${batchId.toUpperCase()}`)).json().inserted.contactIds[0];
      const before = await alice.contact(alices);

      const intoHerList = await bob.postBatch({ createUpdateContacts: [buildContact()], listId: alicesList });
      assert.equal(intoHerList.statusCode, 422);
      assert.equal((await bob.get(`/contacts/${alices}`)).statusCode, 404);
      assert.deepEqual((await bob.get(`/contacts?email=${encodeURIComponent(contact.email!)}`)).json().contacts, []);
      assert.equal((await bob.get(`/lists/${alicesList}/contacts`)).statusCode, 404);
      assert.ok(
        !((await bob.get('/lists')).json().lists as Array<{ listId: string }>).some((l) => l.listId === alicesList),
      );
      assert.equal((await bob.get(`/contacts/batch/${batchId}`)).statusCode, 404);

      // Her contactId, named in Bob's batch, is a contact of Bob's own.
      const herId = await bob.upsert([{ contactId: alices, email: 'bob@example.com' }]);
      assert.deepEqual(herId.inserted.contactIds, [alices]);
      assert.equal((await bob.contact(alices)).email, 'bob@example.com');
      // So is the same email and mobile.
      const bobs = await bob.upsert([contact]);
      assert.equal(bobs.inserted.count, 1);
      assert.deepEqual(await alice.contact(alices), before);
    },
  );
});
