import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { before, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { forEachDatabase } from '../support/databases.ts';
import { consoleSession } from './browser.ts';
import { formatNumber } from '../../web/src/numbers.ts';
import { parseCsv } from '../../web/src/contacts-csv.ts';

/**
 * The console's contact management (issue 32) in headless Chromium against a real listener: a
 * CSV import of 2,000 rows, a contact edited, taken off a list and deleted, lists created,
 * renamed, deleted and exported, a person found by number, exported as JSON and erased (from
 * their contact page and from the search results). Each change is checked through
 * the API as a bearer client sees it; each page is screenshot and checked by axe-core, as in
 * browser.test.ts.
 */
forEachDatabase((dialect) => {
  const session = consoleSession(dialect, `${dialect}-contacts`, {
    clock: new ManualClock(Date.now()),
    env: { SMS_TRANSPORT: 'sandbox:' },
  });
  const { heading, shown, table, row, open } = session;
  let customers: string;

  before(async () => {
    await session.alice.createProperty('firstName');
    customers = await session.alice.createList('Customers');
  });

  const n = (count: number) => formatNumber(count, session.alice.account.row.locale);
  const mobile = (i: number) => `98${String(i).padStart(8, '0')}`;
  const contactOf = async (email: string) => {
    const [contact] = (await session.alice.get(`/contacts?email=${email}`)).json().contacts;
    return contact as { contactId: number; listIds: string[]; propertyfields: unknown[] } | undefined;
  };

  /** Runs `until` while the test's worker is drained (it runs only when drained): an erasure's job, a batch. */
  const draining = async (until: () => Promise<unknown>) => {
    let running = true;
    const worker = (async () => {
      while (running) {
        await session.api.drain();
        await sleep(100);
      }
    })();
    try {
      await until();
    } finally {
      running = false;
      await worker;
    }
  };

  it('signs in', () => session.signIn());

  it('imports 2,000 rows: two bad lines shown before sending, the rest sent in two batches', async () => {
    const lines = ['E-mail;Country code;Mobile;Email opt-in;First name;notes'];
    for (let i = 0; i < 2000; i++) {
      const email = i === 100 ? 'not-an-address' : `c${i}@example.com`;
      const optIn = i === 1500 ? 'maybe' : i % 2 === 0 ? 'true' : 'false';
      // A quoted first name with the delimiter and a quote in it: one field still.
      lines.push(`${email};+91;${mobile(i)};${optIn};"Name ""${i}""; the ${i}th";ignored`);
    }
    await open('/contacts', 'Contacts');
    await session.page.getByRole('link', { name: 'Import contacts' }).click();
    await heading('Import contacts').waitFor();
    await session.page.getByLabel('CSV file').setInputFiles({
      name: 'contacts.csv',
      mimeType: 'text/csv',
      buffer: Buffer.from(`${lines.join('\r\n')}\r\n`),
    });
    await session.page.getByText(`contacts.csv: ${n(2000)} rows after the header, separated by ";".`).waitFor();
    // Guessed from the names; "First name" is the property firstName by choice.
    assert.equal(await session.page.getByLabel('Column Mobile fills').inputValue(), 'mobileNumber');
    assert.equal(await session.page.getByLabel('Column Email opt-in fills').inputValue(), 'emailOptIn');
    assert.equal(await session.page.getByLabel('Column notes fills').inputValue(), 'ignore');
    await session.page.getByLabel('Column First name fills').selectOption('property:firstName');
    await session.page.getByLabel('Also add them to').selectOption({ label: 'Customers' });

    // Before anything is sent: the two bad rows by the line they are on (the header is line 1).
    // The rows are checked again after each change of the mapping above: wait for the check's last.
    const bad = session.page.getByRole('list', { name: 'Rows not sent' });
    await session.page.getByText(`${n(1998)} of ${n(2000)} rows are good: they go in 2 batches`).waitFor();
    await bad.getByRole('listitem').nth(1).waitFor();
    assert.deepEqual(await bad.getByRole('listitem').allInnerTexts(), [
      'Line 102: email "not-an-address" must be an email address',
      'Line 1502: email opt-in "maybe" must be true, false or blank',
    ]);
    assert.equal(
      (await session.alice.get('/contacts?email=c0@example.com')).json().contacts.length,
      0,
      'nothing sent yet',
    );
    await session.browser.look('import-checked');

    await session.page.getByRole('button', { name: `Send ${n(1998)} contacts` }).click();
    // Drained until the page says every contact is applied.
    await draining(() =>
      session.page.getByText(`${n(1998)} of ${n(1998)} contacts applied.`).waitFor({ timeout: 30_000 }),
    );
    assert.equal(await session.page.locator('progress').getAttribute('value'), '1998');
    const batches = table('Batches sent');
    assert.match(await row(batches, '2–1002').innerText(), new RegExp(`Completed\\s+${n(1000)}\\s+0\\s+0`));
    assert.match(await row(batches, '1003–2001').innerText(), /Completed\s+998\s+0\s+0/);
    await session.browser.look('import-sent');

    const members = (await session.alice.get(`/lists/${customers}/contacts?limit=1000`)).json();
    const rest = (
      await session.alice.get(`/lists/${customers}/contacts?limit=1000&cursor=${members.nextCursor}`)
    ).json();
    assert.equal(members.contacts.length + rest.contacts.length, 1998);
    const c7 = (await session.alice.get('/contacts?email=c7@example.com')).json().contacts[0];
    assert.deepEqual(
      [c7.mobileCountryCode, c7.mobileNumber, c7.emailOptIn, c7.propertyfields[0].propertyvalue],
      ['91', mobile(7), false, 'Name "7"; the 7th'],
    );
    assert.equal(await contactOf('c1500@example.com'), undefined, 'a bad row is not sent');
  });

  it('edits a contact, showing the API’s field errors, takes it off a list, and deletes another', async () => {
    const c2 = await contactOf('c2@example.com');
    assert.ok(c2);
    await open(`/contacts/${c2.contactId}`, 'Contact');
    const edit = session.page.getByRole('form', { name: 'Edit the contact' });
    await edit.getByLabel('Email', { exact: true }).fill('not an address');
    await edit.getByRole('button', { name: 'Save contact' }).click();
    await edit.getByText('must be an email address').waitFor();
    assert.equal(await edit.getByLabel('Email', { exact: true }).getAttribute('aria-invalid'), 'true');
    session.refuse(`/contacts/${c2.contactId}`);

    await edit.getByLabel('Email', { exact: true }).fill('ada@example.com');
    await edit.getByLabel('Property firstName').fill('Ada');
    await edit.getByLabel('SMS opt-in').check();
    await edit.getByRole('button', { name: 'Save contact' }).click();
    await edit.getByRole('status').filter({ hasText: 'The contact is saved.' }).waitFor();
    const saved = (await session.alice.get(`/contacts/${c2.contactId}`)).json();
    assert.deepEqual(
      [saved.email, saved.mobileOptIn, saved.emailOptIn, saved.propertyfields[0].propertyvalue],
      ['ada@example.com', true, true, 'Ada'],
    );
    await session.browser.look('contact-edited');

    await session.page.getByRole('button', { name: 'Take off Customers' }).click();
    await session.page.getByRole('status').filter({ hasText: 'Taken off Customers.' }).waitFor();
    assert.ok(!(await session.alice.get(`/contacts/${c2.contactId}`)).json().listIds.includes(customers));

    const c3 = await contactOf('c3@example.com');
    assert.ok(c3);
    await open(`/contacts/${c3.contactId}`, 'Contact');
    await session.page.getByRole('button', { name: 'Delete contact' }).click();
    await session.page.getByRole('button', { name: 'Keep the contact' }).click();
    assert.equal((await session.alice.get(`/contacts/${c3.contactId}`)).statusCode, 200, 'kept when not confirmed');
    await session.page.getByRole('button', { name: 'Delete contact' }).click();
    await session.page.getByRole('button', { name: 'Yes, delete the contact' }).click();
    await heading('Contact deleted').waitFor();
    assert.equal((await session.alice.get(`/contacts/${c3.contactId}`)).statusCode, 404);
  });

  it('creates, renames and deletes a list; a list a scheduled send names is not deleted', async () => {
    await open('/lists', 'Lists');
    await session.page.getByLabel("New list's name").fill('Spring');
    await session.page.getByRole('button', { name: 'Create list' }).click();
    await session.page.getByRole('status').filter({ hasText: 'The list Spring is created.' }).waitFor();
    await session.page.getByRole('link', { name: 'Spring', exact: true }).click();
    await heading('List Spring').waitFor();
    await session.page.getByLabel('Name', { exact: true }).fill('Spring 2026');
    await session.page.getByRole('button', { name: 'Rename list' }).click();
    await heading('List Spring 2026').waitFor();
    const names = async () =>
      ((await session.alice.get('/lists')).json().lists.map((list: { name: string }) => list.name) as string[]).sort();
    assert.deepEqual(await names(), ['All contacts', 'Customers', 'Spring 2026']);
    await session.browser.look('list-renamed');
    await session.page.getByRole('button', { name: 'Delete list' }).click();
    await session.page.getByRole('button', { name: 'Yes, delete the list' }).click();
    await heading('Lists').waitFor();
    assert.deepEqual(await names(), ['All contacts', 'Customers']);

    // A send scheduled for tomorrow names Customers: the API's 409 says why it stays.
    await session.alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'Tomorrow',
      listId: [customers],
      scheduleDateTime: new Date(session.api.clock.now() + 86_400_000).toISOString(),
    });
    await open(`/lists/${customers}`, 'List Customers');
    session.refuse(`/lists/${customers}`);
    await session.page.getByRole('button', { name: 'Delete list' }).click();
    await session.page.getByRole('button', { name: 'Yes, delete the list' }).click();
    await session.page.getByRole('alert').filter({ hasText: 'A send not yet expanded names the list' }).waitFor();
    assert.deepEqual(await names(), ['All contacts', 'Customers']);
  });

  it('exports a list as CSV, every contact on every page, quoted', async () => {
    await open(`/lists/${customers}`, 'List Customers');
    const [download] = await Promise.all([
      session.page.waitForEvent('download'),
      session.page.getByRole('button', { name: 'Export CSV' }).click(),
    ]);
    assert.equal(download.suggestedFilename(), 'Customers.csv');
    const text = readFileSync(await download.path(), 'utf8');
    const file = parseCsv(text);
    assert.deepEqual(file.header, [
      'contactId',
      'email',
      'mobileCountryCode',
      'mobileNumber',
      'mobileOptIn',
      'emailOptIn',
      'firstName',
    ]);
    // 1,998 imported, c2 taken off, c3 deleted.
    assert.equal(file.rows.length, 1996);
    const c8 = await contactOf('c8@example.com');
    assert.ok(
      text.includes(`\r\n${c8!.contactId},c8@example.com,91,${mobile(8)},false,true,"Name ""8""; the 8th"\r\n`),
    );
    await session.page
      .getByRole('status')
      .filter({ hasText: `${n(1996)} contacts exported.` })
      .waitFor();
    await session.browser.look('list-exported');
  });

  it('finds a person by number, and a message by its id: the contact, its SMS and its suppression', async () => {
    // c2, whose SMS opt-in the edit above set: a number without consent is not sent to.
    const number = `91${mobile(2)}`;
    const queueId = await session.alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'Hello',
      recipients: [{ mobileNo: number }],
    });
    await session.api.drain();
    await session.alice.post('/sms/suppressions', { number, reason: 'asked by phone' });
    await open('/contacts', 'Contacts');
    await session.page.getByLabel('Number or address').fill(`+91 ${mobile(2)}`);
    await session.page.getByRole('button', { name: 'Search' }).click();
    await row(table('Contacts found'), 'ada@example.com').waitFor();
    await row(table('SMS sends to the number, newest first'), queueId).waitFor();
    await row(table('SMS suppressions of the number'), 'asked by phone').waitFor();
    await session.browser.look('person');

    // A message id finds the message, its send and whom it went to.
    const messageId = (await session.alice.get(`/sms/${queueId}`)).json().recipients[0].messageId as string;
    await session.page.getByLabel('Number or address').fill(messageId);
    await session.page.getByRole('button', { name: 'Search' }).click();
    const message = session.page.getByRole('region', { name: 'Message', exact: true });
    await message.getByRole('link', { name: queueId }).waitFor();
    await message.getByRole('link', { name: number }).click();
    await row(table('Contacts found'), 'ada@example.com').waitFor();

    await session.page.getByLabel('Number or address').fill('c5@example.com');
    await session.page.getByRole('button', { name: 'Search' }).click();
    await row(table('Contacts found'), 'c5@example.com').waitFor();
    await table('Email batches to the address, newest first').getByText('No email was sent').waitFor();
    await table('Email suppressions of the address').getByText('Not suppressed').waitFor();
  });

  it('shows a contact with its messages at once: a slow read of them moves no button below them', async () => {
    // c2, sent an SMS by the test above.
    const c2 = await contactOf('ada@example.com');
    assert.ok(c2);
    const messagesPath = `/contacts/${c2.contactId}/messages`;
    await session.page.route(
      (url) => url.pathname === messagesPath,
      async (route) => {
        await sleep(500);
        await route.continue();
      },
    );
    try {
      await session.page.goto(`${session.base}/console/contacts/${c2.contactId}`);
      await heading('Contact').waitFor();
      const remove = session.page.getByRole('button', { name: 'Delete contact' });
      const before = await remove.boundingBox();
      assert.equal(await table('Messages sent to this contact, newest first').getByRole('row').count(), 2);
      await sleep(800);
      assert.deepEqual(await remove.boundingBox(), before);
    } finally {
      await session.page.unrouteAll({ behavior: 'ignoreErrors' });
    }
  });

  it('exports a person found by number as one JSON file, then erases them from their contact page', async () => {
    const c6 = await contactOf('c6@example.com');
    assert.ok(c6);
    const number = `91${mobile(6)}`;
    await session.alice.upsert([{ contactId: c6.contactId, mobileOptIn: true }]);
    const sent = [];
    for (const body of ['One', 'Two']) {
      sent.push(
        await session.alice.accept('/sms/batch', { senderName: 'HERALD', body, recipients: [{ mobileNo: number }] }),
      );
    }
    await session.api.drain();

    await open('/contacts', 'Contacts');
    await session.page.getByLabel('Number or address').fill(`+91 ${mobile(6)}`);
    await session.page.getByRole('button', { name: 'Search' }).click();
    await row(table('Contacts found'), 'c6@example.com').waitFor();
    const [download] = await Promise.all([
      session.page.waitForEvent('download'),
      session.page.getByRole('button', { name: 'Export their data' }).click(),
    ]);
    assert.equal(download.suggestedFilename(), `herald-export-${number}.json`);
    const file = JSON.parse(readFileSync(await download.path(), 'utf8'));
    assert.deepEqual(Object.keys(file), [
      'contacts',
      'lists',
      'sms',
      'email',
      'clicks',
      'suppressions',
      'inbound',
      'verifications',
    ]);
    assert.deepEqual(
      file.contacts.map((c: { contactId: number; email: string }) => [c.contactId, c.email]),
      [[c6.contactId, 'c6@example.com']],
    );
    assert.deepEqual(file.sms.map((m: { queueId: string }) => m.queueId).sort(), [...sent].sort());
    assert.ok(file.lists.some((list: { listId: string }) => list.listId === customers));
    await session.page
      .getByRole('status')
      .filter({ hasText: `The file herald-export-${number}.json is saved.` })
      .waitFor();

    await row(table('Contacts found'), 'c6@example.com').getByRole('link').click();
    await shown('Contact');
    const rights = session.page.getByRole('region', { name: 'Data rights' });
    await rights.getByRole('button', { name: 'Erase this person' }).click();
    const ask = rights.getByRole('form', { name: 'Erase the person' });
    const yes = ask.getByRole('button', { name: `Yes, erase ${number}` });
    assert.ok(await yes.isDisabled(), 'not until the number is typed again');
    await ask.getByLabel('Number or address to erase').fill(mobile(6));
    assert.ok(await yes.isDisabled(), 'not for the number without its country code');
    await ask.getByLabel('Number or address to erase').press('Enter');
    await ask.getByRole('button', { name: 'Keep their data' }).click();
    assert.equal((await session.alice.get(`/contacts/${c6.contactId}`)).statusCode, 200, 'kept when not confirmed');

    await rights.getByRole('button', { name: 'Erase this person' }).click();
    await ask.getByLabel('Number or address to erase').fill(`+91 ${mobile(6)}`);
    await session.browser.look('person-erase-asked');
    await yes.click();
    await draining(() => heading('Contact erased').waitFor({ timeout: 30_000 }));
    await session.page
      .getByRole('status')
      .filter({ hasText: `Erased 1 contact and 2 messages. Contact ${c6.contactId} is gone.` })
      .waitFor();
    await session.browser.look('contact-erased');
    assert.equal((await session.alice.get(`/contacts/${c6.contactId}`)).statusCode, 404);
    assert.deepEqual((await session.alice.get(`/sms?recipient=${number}`)).json().sends, []);
    assert.deepEqual((await session.alice.get('/contacts?email=c6@example.com')).json().contacts, []);
    await session.page.getByRole('link', { name: 'Back to the contacts' }).click();
    await heading('Contacts').waitFor();
  });

  it('erases a person found by address from the search results, which then find no one', async () => {
    const c9 = await contactOf('c9@example.com');
    assert.ok(c9);
    await open('/contacts?email=c9@example.com', 'Contacts');
    await row(table('Contacts found'), 'c9@example.com').waitFor();
    const rights = session.page.getByRole('region', { name: 'Data rights' });
    await rights.getByRole('button', { name: 'Erase this person' }).click();
    await rights.getByLabel('Number or address to erase').fill('C9@Example.com ');
    await rights.getByLabel('Number or address to erase').press('Enter');
    await draining(() =>
      rights.getByRole('status').filter({ hasText: 'Erased 1 contact and 0 messages.' }).waitFor({ timeout: 30_000 }),
    );
    await table('Contacts found').getByText('No contact has that email or mobile.').waitFor();
    await session.page.getByRole('region', { name: 'Suppression' }).getByText('Erased: they stay suppressed').waitFor();
    assert.equal((await session.alice.get(`/contacts/${c9.contactId}`)).statusCode, 404);
    assert.deepEqual(
      (await session.alice.get(`/contacts?mobile=91${mobile(9)}`)).json().contacts,
      [],
      'their number too',
    );
  });

  it('fits a phone: the import, a contact and a list do not scroll sideways', async () => {
    await session.page.setViewportSize({ width: 375, height: 800 });
    const c4 = await contactOf('c4@example.com');
    for (const [path, title] of [
      ['/contacts/import', 'Import contacts'],
      [`/contacts/${c4!.contactId}`, 'Contact'],
      [`/lists/${customers}`, 'List Customers'],
    ]) {
      await open(path, title);
      assert.equal(await session.page.evaluate(() => document.documentElement.scrollWidth), 375, path);
    }
    await session.page.setViewportSize({ width: 1280, height: 900 });
  });
});
