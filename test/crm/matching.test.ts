import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import {
  buildContact,
  buildEmail,
  buildMobile,
  startApiTest,
  type ApiClient,
  type ApiTest,
} from '../support/client.ts';

forEachDatabase((dialect) => {
  let crm: ApiTest;
  let alice: ApiClient;
  beforeEach(async () => {
    crm = await startApiTest(dialect);
    alice = await crm.client();
  });
  afterEach(() => crm.close());

  const search = async (query: string) =>
    (await alice.get(`/contacts?${query}`)).json().contacts as Array<{
      contactId: number;
      email: string | null;
      mobileNumber: string | null;
    }>;

  it('mobile and email: updates the record with both, else creates one', async () => {
    const contact = buildContact();
    const first = await alice.upsert([contact]);
    assert.equal(first.status, 'Completed');
    assert.equal(first.inserted.count, 1);
    const [id] = first.inserted.contactIds;

    const again = await alice.upsert([{ ...contact, emailOptIn: true }]);
    assert.deepEqual([again.inserted.count, again.updated.contactIds, again.skipped.count], [0, [id], 0]);
    assert.equal((await alice.contact(id)).emailOptIn, true);

    // The same mobile with another email is another pair: a new record.
    const other = await alice.upsert([{ ...contact, email: buildEmail() }]);
    assert.equal(other.inserted.count, 1);
    assert.notEqual(other.inserted.contactIds[0], id);
  });

  it('mobile only: updates the record with that mobile and no email, never one that has an email', async () => {
    const mobile = buildMobile();
    const withEmail = await alice.upsert([{ ...mobile, email: buildEmail() }]);
    const created = await alice.upsert([{ ...mobile, mobileOptIn: true }]);
    assert.equal(created.inserted.count, 1, 'the record with an email is not the match');
    const [mobileOnlyId] = created.inserted.contactIds;
    assert.notEqual(mobileOnlyId, withEmail.inserted.contactIds[0]);

    const updated = await alice.upsert([{ ...mobile, mobileOptIn: false }]);
    assert.deepEqual(updated.updated.contactIds, [mobileOnlyId]);
    const stored = await alice.contact(mobileOnlyId);
    assert.equal(stored.email, null);
    assert.equal(stored.mobileOptIn, false);
    // email "" is no email: still the mobile-only rule.
    const blankEmail = await alice.upsert([{ ...mobile, email: '', mobileOptIn: true }]);
    assert.deepEqual(blankEmail.updated.contactIds, [mobileOnlyId]);
  });

  it('email only: updates the record with that email and no mobile, never one that has a mobile', async () => {
    const email = buildEmail();
    const withMobile = await alice.upsert([{ email, ...buildMobile() }]);
    const created = await alice.upsert([{ email }]);
    assert.equal(created.inserted.count, 1);
    const [emailOnlyId] = created.inserted.contactIds;
    assert.notEqual(emailOnlyId, withMobile.inserted.contactIds[0]);

    const updated = await alice.upsert([{ email: email.toUpperCase(), emailOptIn: true }]);
    assert.deepEqual(updated.updated.contactIds, [emailOnlyId], 'emails match case-insensitively');
    const stored = await alice.contact(emailOnlyId);
    assert.equal(stored.mobileNumber, null);
    assert.equal(stored.email, email);
    assert.equal(stored.emailOptIn, true);
  });

  it('contactId: updates that record, whatever its email and mobile, or creates it under that id', async () => {
    const [id] = (await alice.upsert([buildContact()])).inserted.contactIds;
    const email = buildEmail();
    const mobile = { mobileCountryCode: 44, mobileNumber: 7911123456 };
    const updated = await alice.upsert([{ contactId: id, email, ...mobile }]);
    assert.deepEqual(updated.updated.contactIds, [id]);
    const stored = await alice.contact(id);
    assert.deepEqual([stored.email, stored.mobileCountryCode, stored.mobileNumber], [email, '44', '7911123456']);

    const chosen = id + 1000;
    const created = await alice.upsert([{ contactId: chosen, email: buildEmail() }]);
    assert.deepEqual(created.inserted.contactIds, [chosen]);
    assert.equal((await alice.contact(chosen)).contactId, chosen);

    // Ids the service hands out later pass over the one the client chose.
    const many = await alice.upsert(Array.from({ length: 1100 }, () => ({ email: buildEmail() })).slice(0, 1000));
    assert.equal(many.inserted.count, 1000);
    assert.ok(!many.inserted.contactIds.includes(chosen));
    assert.equal(new Set(many.inserted.contactIds).size, 1000);
  });

  it('keeps omitted fields on update, and treats blank opt-ins as omitted', async () => {
    const propertyid = await alice.createProperty('firstName');
    const [id] = (
      await alice.upsert([
        buildContact({ mobileOptIn: true, emailOptIn: true, propertyfields: [{ propertyid, propertyvalue: 'Ada' }] }),
      ])
    ).inserted.contactIds;
    const before = await alice.contact(id);

    const result = await alice.upsert([{ contactId: id, mobileOptIn: '', emailOptIn: null, propertyfields: [] }]);
    assert.deepEqual(result.skipped.contactIds, [id]);
    const after = await alice.contact(id);
    assert.deepEqual(after, before);
  });

  it('opt-ins default to false on create (omitted or blank) and keep their value on update', async () => {
    const result = await alice.upsert([
      buildContact(),
      buildContact({ mobileOptIn: '', emailOptIn: null }),
      buildContact({ mobileOptIn: true, emailOptIn: false }),
    ]);
    const [omitted, blank, given] = await Promise.all(result.inserted.contactIds.map((id) => alice.contact(id)));
    assert.deepEqual([omitted.mobileOptIn, omitted.emailOptIn], [false, false]);
    assert.deepEqual([blank.mobileOptIn, blank.emailOptIn], [false, false]);
    assert.deepEqual([given.mobileOptIn, given.emailOptIn], [true, false]);

    await alice.upsert([{ contactId: given.contactId, emailOptIn: true }]);
    const updated = await alice.contact(given.contactId);
    assert.deepEqual([updated.mobileOptIn, updated.emailOptIn], [true, true], 'mobileOptIn, omitted, stays true');
  });

  it('writes properties by id and by name (case-insensitively), merging with the stored ones', async () => {
    const first = await alice.createProperty('firstName');
    const city = await alice.createProperty('City');
    const [id] = (await alice.upsert([buildContact({ propertyfields: [{ propertyid: first, propertyvalue: 'Ada' }] })]))
      .inserted.contactIds;
    await alice.upsert([{ contactId: id, propertyfields: [{ propertyname: 'CITY', propertyvalue: 'London' }] }]);
    const stored = await alice.contact(id);
    assert.deepEqual(
      stored.propertyfields.sort((a, b) => a.propertyname.localeCompare(b.propertyname)),
      [
        { propertyid: city, propertyname: 'City', propertyvalue: 'London' },
        { propertyid: first, propertyname: 'firstName', propertyvalue: 'Ada' },
      ],
    );
    // With both an id and a name, the id decides.
    await alice.upsert([
      { contactId: id, propertyfields: [{ propertyid: first, propertyname: 'City', propertyvalue: 'Grace' }] },
    ]);
    const renamed = await alice.contact(id);
    assert.equal(renamed.propertyfields.find((p) => p.propertyid === first)!.propertyvalue, 'Grace');
    assert.equal(renamed.propertyfields.find((p) => p.propertyid === city)!.propertyvalue, 'London');
  });

  it('two entries that reach one record write to it in order, the later winning, and count it once', async () => {
    const email = buildEmail();
    const propertyid = await alice.createProperty('tier');
    const result = await alice.upsert([
      { email, mobileOptIn: true, emailOptIn: true, propertyfields: [{ propertyid, propertyvalue: 'gold' }] },
      { email, emailOptIn: false },
    ]);
    assert.deepEqual([result.inserted.count, result.updated.count, result.skipped.count], [1, 0, 0]);
    const stored = await alice.contact(result.inserted.contactIds[0]);
    assert.deepEqual(
      [stored.mobileOptIn, stored.emailOptIn, stored.propertyfields[0].propertyvalue],
      [true, false, 'gold'],
    );

    // A contactId entry gives a record a new email; a later entry with the new pair reaches that record.
    const [other] = (await alice.upsert([buildContact()])).inserted.contactIds;
    const { mobileCountryCode, mobileNumber } = await alice.contact(other);
    const fresh = buildEmail();
    const moved = await alice.upsert([
      { contactId: other, email: fresh },
      { email: fresh, mobileCountryCode: mobileCountryCode!, mobileNumber: mobileNumber!, emailOptIn: true },
    ]);
    assert.deepEqual([moved.inserted.count, moved.updated.contactIds], [0, [other]]);
    assert.equal((await alice.contact(other)).emailOptIn, true);
  });

  it('skips a record the batch leaves exactly as it was, without moving updatedAt; every change moves it', async () => {
    const contact = buildContact({ mobileOptIn: true });
    const [id] = (await alice.upsert([contact])).inserted.contactIds;
    const created = await alice.contact(id);
    assert.equal(created.updatedAt, new Date(crm.clock.now()).toISOString());

    crm.clock.advance(60_000);
    const same = await alice.upsert([contact]);
    assert.deepEqual([same.skipped.contactIds, same.updated.count], [[id], 0]);
    assert.equal((await alice.contact(id)).updatedAt, created.updatedAt);

    const changed = await alice.upsert([{ ...contact, mobileOptIn: false }]);
    assert.deepEqual(changed.updated.contactIds, [id]);
    assert.equal((await alice.contact(id)).updatedAt, new Date(crm.clock.now()).toISOString());
  });

  it(
    'adds contacts to listId and to All contacts; joining a ' + 'list is an update, being in it already a skip',
    async () => {
      const lists = (await alice.get('/lists')).json().lists as Array<{ listId: string; name: string }>;
      assert.equal(lists[0].name, 'All contacts');
      const all = lists[0].listId;
      const vip = await alice.createList('VIP');

      const contact = buildContact();
      const created = await alice.upsert([contact]);
      assert.equal(created.listId, all);
      const id = created.inserted.contactIds[0];
      assert.deepEqual((await alice.contact(id)).listIds, [all]);

      const joined = await alice.upsert([contact], { listId: vip });
      assert.deepEqual(joined.updated.contactIds, [id]);
      assert.deepEqual((await alice.contact(id)).listIds.sort(), [all, vip].sort());
      const again = await alice.upsert([contact], { listId: vip });
      assert.deepEqual(again.skipped.contactIds, [id]);

      const straightIn = await alice.upsert([buildContact()], { listId: vip });
      assert.deepEqual((await alice.contact(straightIn.inserted.contactIds[0])).listIds.sort(), [all, vip].sort());
      assert.equal((await search(`email=${encodeURIComponent(contact.email!)}`))[0].contactId, id);
    },
  );
});
