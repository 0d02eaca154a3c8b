import { procedure } from '../../../src/db/procedure.ts';
import { AppError, notFound, unprocessable } from '../../../src/errors.ts';

/** Procedures that fail as a request's work can: test/db/procedure-errors.test.ts. */
export const throwsUnprocessable = procedure(import.meta.url, 'throwsUnprocessable', async () => {
  throw unprocessable(
    'The contact batch was rejected.',
    [{ field: 'createUpdateContacts[0].propertyfields[0].propertyname', message: 'is not a property of this account' }],
    {
      InvalidProperties: ['nickname'],
      InvalidContactIds: [],
    },
  );
});

export const throwsNotFound = procedure(import.meta.url, 'throwsNotFound', async () => {
  throw notFound('The list');
});

export const throwsWithHeaders = procedure(import.meta.url, 'throwsWithHeaders', async () => {
  throw new AppError(429, 'Slow down.', { headers: { 'retry-after': '3' } });
});

export const insertsTwice = procedure(import.meta.url, 'insertsTwice', async ({ db }, args: { key: string }) => {
  const row = { scope: 'test', key: args.key, request_hash: '', status_code: 0, response_body: '', created_at: 0 };
  await db.insertInto('idempotency_keys').values(row).execute();
  await db.insertInto('idempotency_keys').values(row).execute();
});

export const throwsNull = procedure(import.meta.url, 'throwsNull', async () => {
  // What a careless procedure may throw: not an Error.
  throw null;
});

/** A result the structured clone cannot carry across threads. */
export const returnsAFunction = procedure(import.meta.url, 'returnsAFunction', async () => () => 42);
