import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import { bearer, startTestApp, type TestApp } from '../support/app.ts';

// What the request lines of the log hold: the route's pattern, never the path's tokens or the query's values.
forEachDatabase((dialect) => {
  let t: TestApp;
  let lines: Array<{ msg: string; req?: { url: string } }>;
  beforeEach(async () => {
    lines = [];
    const stream = { write: (line: string) => void lines.push(JSON.parse(line)) };
    t = await startTestApp(dialect, { logger: { level: 'info', stream } });
  });
  afterEach(() => t.close());

  it('logs a request by its route pattern, without the query string or the tokens of /t/ and /l/ paths', async () => {
    const auth = bearer(await t.tokenFor(await t.createAccount()));
    const token = 'AAAAAAAAAAABAADk1nB0TGk4wWnQKMhzkLKeA';
    const secrets = ['ada%40example.com', 'ada@example.com', token, 'Xk3q9ZbA', '919812345678', 'hunter2'];
    const requests: Array<['GET' | 'DELETE', string, string]> = [
      ['GET', '/contacts?email=ada%40example.com', '/contacts'],
      ['GET', `/t/c/${token}?u=hunter2`, '/t/c/:token'],
      ['GET', `/t/o/${token}`, '/t/o/:token'],
      ['GET', '/l/Xk3q9ZbA', '/l/:code'],
      ['DELETE', '/sms/suppressions/919812345678', '/sms/suppressions/:number'],
      ['GET', '/no/such/route/919812345678?secret=hunter2', '(no route)'],
    ];
    for (const [method, url] of requests) await t.app.inject({ method, url, headers: auth });
    const incoming = lines.filter((line) => line.msg === 'incoming request').map((line) => line.req?.url);
    // The first is POST /token, made to sign in.
    assert.deepEqual(
      incoming.slice(1),
      requests.map(([, , pattern]) => pattern),
    );
    const logged = lines.map((line) => JSON.stringify(line)).join('\n');
    for (const secret of secrets) assert.ok(!logged.includes(secret), `${secret} is not in the log:\n${logged}`);
  });
});
