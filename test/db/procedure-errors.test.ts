import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { isUniqueViolation } from '../../src/db/errors.ts';
import { AppError } from '../../src/errors.ts';
import { bearer, startTestApp, type TestApp } from '../support/app.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import {
  insertsTwice,
  returnsAFunction,
  throwsNotFound,
  throwsNull,
  throwsUnprocessable,
  throwsWithHeaders,
} from './support/failing-procedures.ts';

const FAILING = new URL('./support/failing-procedures.ts', import.meta.url).href;

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('the procedure did not fail');
}

const fields = (error: AppError) => ({
  statusCode: error.statusCode,
  message: error.message,
  errors: error.errors,
  data: error.data,
  headers: error.headers,
});

forEachDatabase((dialect) => {
  describe('a procedure that fails', () => {
    let database: TestDatabase;
    let withFailing: Database;
    beforeEach(async () => {
      database = await createTestDatabase(dialect);
      withFailing = openDatabase(database.url, { procedures: [FAILING] });
    });
    afterEach(async () => {
      await withFailing.close();
      await database.close();
    });

    it('throws a named error as itself: its class, status, message, errors and data', async () => {
      const error = await failure(withFailing.call(throwsUnprocessable, undefined));
      assert.ok(error instanceof AppError);
      assert.deepEqual(fields(error), {
        statusCode: 422,
        message: 'The contact batch was rejected.',
        errors: [
          {
            field: 'createUpdateContacts[0].propertyfields[0].propertyname',
            message: 'is not a property of this account',
          },
        ],
        data: { InvalidProperties: ['nickname'], InvalidContactIds: [] },
        headers: {},
      });
      const missing = await failure(withFailing.call(throwsNotFound, undefined));
      assert.ok(missing instanceof AppError);
      assert.deepEqual(fields(missing), {
        statusCode: 404,
        message: 'The list was not found.',
        errors: [],
        data: undefined,
        headers: {},
      });
    });

    it('keeps the headers of a named error', async () => {
      const error = await failure(withFailing.call(throwsWithHeaders, undefined));
      assert.ok(error instanceof AppError);
      assert.deepEqual([error.statusCode, error.headers], [429, { 'retry-after': '3' }]);
    });

    it('fails a procedure that throws null or returns what cannot be cloned, and goes on serving', async () => {
      // SQLite's thread answers each (PostgreSQL's procedures run in the caller's thread).
      for (const failing of [throwsNull, returnsAFunction]) {
        const settled = await withFailing.call(failing as typeof throwsNull, undefined).then(
          () => 'resolved',
          (error: unknown) => (error instanceof Error ? 'an Error' : String(error)),
        );
        if (dialect === 'sqlite') assert.equal(settled, 'an Error');
      }
      const next = await failure(withFailing.call(insertsTwice, { key: randomUUID() }));
      assert.ok(isUniqueViolation(next), 'the next request is served, its own error and all');
    });

    it("keeps the database's own error: a unique violation is still one", async () => {
      const error = await failure(withFailing.call(insertsTwice, { key: randomUUID() }));
      assert.ok(!(error instanceof AppError));
      assert.ok(isUniqueViolation(error));
    });
  });

  describe('a POST whose procedure throws a named error', () => {
    let t: TestApp;
    let token: string;
    beforeEach(async () => {
      t = await startTestApp(dialect);
      token = await t.tokenFor(await t.createAccount());
    });
    afterEach(() => t.close());

    it('answers 404 with the contract body', async () => {
      const response = await t.app.inject({
        method: 'POST',
        url: `/webhooks/deliveries/${randomUUID()}/retry`,
        headers: bearer(token),
      });
      assert.equal(response.statusCode, 404);
      assert.deepEqual(response.json(), {
        status: 'Failure',
        message: 'The webhook delivery was not found.',
        errors: [],
      });
    });

    it('answers 409 with the contract body', async () => {
      const create = () =>
        t.app.inject({ method: 'POST', url: '/lists', headers: bearer(token), payload: { name: 'VIP' } });
      assert.equal((await create()).statusCode, 201);
      const again = await create();
      assert.equal(again.statusCode, 409);
      assert.deepEqual(again.json(), {
        status: 'Failure',
        message: 'A list named VIP already exists.',
        errors: [{ field: 'name', message: 'is already taken' }],
      });
    });
  });
});
