import assert from 'node:assert/strict';
import { it } from 'node:test';
import {
  confirms,
  type ExportPage,
  erasedWords,
  exportEverything,
  exportFileName,
  personOfContact,
} from '../../web/src/privacy.ts';
import type { Contact } from '../../web/src/types.ts';

// The console's data rights (web/src/privacy.ts): whom a contact names, the erase confirmation,
// the export's pages joined into one file, and the erasure's counts in words.

const ada: Contact = {
  contactId: 3,
  email: 'Ada@example.com',
  mobileCountryCode: '91',
  mobileNumber: '9812345678',
  mobileOptIn: false,
  emailOptIn: true,
  propertyfields: [],
  listIds: [],
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
};

it('takes a contact by its mobile as digits, else its email', () => {
  assert.deepEqual(personOfContact(ada), { mobile: '919812345678' });
  assert.deepEqual(personOfContact({ ...ada, mobileCountryCode: null, mobileNumber: null }), {
    email: 'Ada@example.com',
  });
  assert.equal(personOfContact({ ...ada, mobileNumber: null, email: null }), null);
  assert.equal(exportFileName({ mobile: '919812345678' }), 'herald-export-919812345678.json');
});

it('confirms an erasure only when the number or address is typed again', () => {
  const number = { mobile: '919812345678' };
  assert.ok(confirms(number, '+91 98123-45678'));
  assert.ok(!confirms(number, '9812345678'), 'without its country code');
  assert.ok(!confirms(number, ''));
  assert.ok(confirms({ email: 'Ada@example.com' }, ' ada@EXAMPLE.com '));
  assert.ok(!confirms({ email: 'ada@example.com' }, 'ada@example.co'));
});

const page = (over: Partial<ExportPage>): ExportPage => ({
  contacts: [],
  lists: [],
  sms: [],
  email: [],
  clicks: [],
  suppressions: [],
  inbound: [],
  verifications: [],
  nextCursor: null,
  ...over,
});

it('follows nextCursor to the last page, joining every page into one export', async () => {
  const pages = new Map<string | undefined, ExportPage>([
    [
      undefined,
      page({
        contacts: [{ contactId: 3 }],
        lists: [{ listId: 'l', name: 'All contacts' }],
        suppressions: [{ channel: 'sms' }],
        inbound: [{ text: 'STOP' }],
        verifications: [{ verificationId: 'v' }],
        sms: [1, 2],
        clicks: ['a'],
        nextCursor: 'p2',
      }),
    ],
    ['p2', page({ sms: [3], email: [4], clicks: ['b'], nextCursor: 'p3' })],
    ['p3', page({ email: [5, 6] })],
  ]);
  const asked: Array<string | undefined> = [];
  const read: number[] = [];
  const joined = await exportEverything(
    async (cursor) => {
      asked.push(cursor);
      return pages.get(cursor)!;
    },
    (n) => read.push(n),
  );
  assert.deepEqual(asked, [undefined, 'p2', 'p3']);
  assert.deepEqual(read, [2, 4, 6]);
  assert.deepEqual(joined, {
    contacts: [{ contactId: 3 }],
    lists: [{ listId: 'l', name: 'All contacts' }],
    sms: [1, 2, 3],
    email: [4, 5, 6],
    clicks: ['a', 'b'],
    suppressions: [{ channel: 'sms' }],
    inbound: [{ text: 'STOP' }],
    verifications: [{ verificationId: 'v' }],
  });
  assert.ok(!('nextCursor' in joined));
});

it('stops on a cursor given twice rather than reading for ever', async () => {
  await assert.rejects(
    exportEverything(async () => page({ nextCursor: 'same' })),
    /the same page twice/,
  );
});

it('says the counts in words, one or many', () => {
  assert.equal(erasedWords({ contacts: 1, messages: 4 }), 'Erased 1 contact and 4 messages.');
  assert.equal(erasedWords({ contacts: 0, messages: 1 }), 'Erased 0 contacts and 1 message.');
  assert.equal(
    erasedWords({ contacts: 2, messages: 1234 }, (n) => n.toLocaleString('en')),
    'Erased 2 contacts and 1,234 messages.',
  );
});
