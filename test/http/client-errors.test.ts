import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type AddressInfo } from 'node:net';
import { after, before, it } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.ts';

// Requests Node's HTTP parser refuses never reach a route: answered in the contract's shape all the same.

let t: TestApp;
let port: number;
before(async () => {
  t = await startTestApp('sqlite');
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  port = (t.app.server.address() as AddressInfo).port;
});
after(() => t.close());

/** Writes `request` as it is and reads the whole answer, the connection closed after it. */
async function raw(request: string): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  socket.end(request);
  let answer = '';
  socket.on('data', (chunk: Buffer) => {
    answer += chunk.toString('latin1');
  });
  await once(socket, 'close');
  return answer;
}

it('answers a request the HTTP parser refuses with 400 in the contract’s shape', async () => {
  for (const request of [
    'GET /healthz HTTP/1.1\r\nHost: h\r\nX-Odd: a\u0000b\r\n\r\n',
    'POST /lists HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
  ]) {
    const answer = await raw(request);
    assert.match(answer, /^HTTP\/1\.1 400 Bad Request\r\n/, JSON.stringify(request));
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
    assert.deepEqual(body, { status: 'Failure', message: 'The request is not well-formed HTTP.', errors: [] });
  }
});

it('answers headers over 16 KB with 431 in the contract’s shape', async () => {
  const answer = await raw(`GET /contacts?email=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: h\r\n\r\n`);
  assert.match(answer, /^HTTP\/1\.1 431 /);
  assert.equal(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).status, 'Failure');
});
