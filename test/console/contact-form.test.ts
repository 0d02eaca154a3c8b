import assert from 'node:assert/strict';
import { it } from 'node:test';
import { draftOf, patchOf } from '../../web/src/contact-form.ts';
import type { Contact } from '../../web/src/types.ts';

// The contact page's form (web/src/contact-form.ts): what PATCH /contacts/{id} is sent.

const ada: Contact = {
  contactId: 3,
  email: 'ada@example.com',
  mobileCountryCode: '91',
  mobileNumber: '9812345678',
  mobileOptIn: false,
  emailOptIn: true,
  propertyfields: [
    { propertyid: '00000000-0000-4000-8000-000000000001', propertyname: 'firstName', propertyvalue: 'Ada' },
  ],
  listIds: [],
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
};
const before = draftOf(ada, ['firstName', 'city']);

it('sends nothing for a form left as it was', () => {
  assert.deepEqual(before.properties, { firstName: 'Ada', city: '' });
  assert.deepEqual(patchOf(before, before), {});
  assert.deepEqual(patchOf(before, { ...before, mobileNumber: ' 98123 45678 ' }), {}, 'the same number, spaced');
});

it('sends only what changed: a mobile whole and as digits, opt-ins, properties by name', () => {
  assert.deepEqual(
    patchOf(before, {
      ...before,
      mobileCountryCode: '+44',
      mobileOptIn: true,
      properties: { firstName: 'Ada', city: 'London' },
    }),
    {
      mobileCountryCode: '44',
      mobileNumber: '9812345678',
      mobileOptIn: true,
      propertyfields: [{ propertyname: 'city', propertyvalue: 'London' }],
    },
  );
  assert.deepEqual(patchOf(before, { ...before, email: ' grace@example.com ' }), { email: 'grace@example.com' });
});

it('leaves out a blank email or mobile, which the API would keep, but sends a property emptied', () => {
  assert.deepEqual(patchOf(before, { ...before, email: '', mobileCountryCode: '', mobileNumber: '' }), {});
  assert.deepEqual(patchOf(before, { ...before, properties: { firstName: '', city: '' } }), {
    propertyfields: [{ propertyname: 'firstName', propertyvalue: '' }],
  });
});
