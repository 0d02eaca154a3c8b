import assert from 'node:assert/strict';
import { it } from 'node:test';
import Fastify from 'fastify';
import { schemaCompilers } from '../../src/http/schema-compilers.ts';

/** Each app makes its route's schemas anew, as the route modules do: the compilers share what is the same. */
async function appWith(maximum: number, validators: unknown[]) {
  const app = Fastify({ schemaController: { compilersFactory: schemaCompilers() } });
  app.post(
    '/numbers',
    {
      schema: {
        body: { type: 'object', required: ['n'], properties: { n: { type: 'integer', maximum } } },
        response: { 200: { type: 'object', properties: { n: { type: 'integer' } } } },
      },
    },
    async (request) => {
      validators.push(request.getValidationFunction('body'));
      return { n: (request.body as { n: number }).n, kept: 'nowhere' };
    },
  );
  await app.ready();
  return app;
}

it('compiles a schema once for every app of the process, and keeps schemas that differ apart', async () => {
  const validators: unknown[] = [];
  const apps = [await appWith(10, validators), await appWith(10, validators), await appWith(5, validators)];
  try {
    const post = (app: (typeof apps)[number], n: number) =>
      app.inject({ method: 'POST', url: '/numbers', body: { n } });
    for (const app of apps) {
      const answer = await post(app, 3);
      assert.equal(answer.statusCode, 200);
      assert.deepEqual(answer.json(), { n: 3 }, 'serialized by its response schema');
    }
    assert.equal(validators[0], validators[1], 'the same schema: one validator');
    assert.notEqual(validators[0], validators[2], 'another maximum: its own validator');
    assert.equal((await post(apps[0], 7)).statusCode, 200);
    assert.equal((await post(apps[2], 7)).statusCode, 400);
  } finally {
    await Promise.all(apps.map((app) => app.close()));
  }
});
