import assert from 'node:assert/strict';
import { it } from 'node:test';
import { candidateKeys } from '../../src/crm/apply.ts';

// The keys a contact batch looks its stored contacts up by (crm/apply.ts): no database.
it('asks for each key once, however many entries give it', () => {
  const entries = [
    ...Array.from({ length: 1000 }, () => ({ email: 'ada@example.com' })),
    ...Array.from({ length: 3 }, () => ({ mobile: '447911123456' })),
    ...Array.from({ length: 3 }, () => ({ mobile: '447911123456', email: 'ada@example.com' })),
    { contactId: 7 },
    { contactId: 7, email: 'bob@example.com' },
  ];
  const keys = candidateKeys('account', 'list', 'all', entries);
  assert.deepEqual(
    { ids: keys.ids, pairs: keys.pairs, mobiles: keys.mobiles, emails: keys.emails },
    {
      ids: [7],
      pairs: [{ mobile: '447911123456', email: 'ada@example.com' }],
      mobiles: ['447911123456'],
      emails: ['ada@example.com'],
    },
  );
});
