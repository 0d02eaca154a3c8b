import assert from 'node:assert/strict';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, it } from 'node:test';
import { SMTPServer } from 'smtp-server';
import { ManualClock } from '../../src/clock.ts';
import { startApiTest, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';
import { buildBatch } from '../email/support.ts';

/**
 * A retry that comes due while its batch is still sending is decided again before a page takes
 * it (email/record.ts, decideDueRetries), as a run's start decides those due then: an address
 * suppressed while its message waited ends Dropped. Over a relay of the test's own (smtp-server)
 * that refuses slow@ for now the first time (451 at RCPT), holds gate@'s data until released,
 * and takes everything else.
 */
async function relay() {
  const gateTaken = Promise.withResolvers<void>();
  const released = Promise.withResolvers<void>();
  let slowTries = 0;
  const delivered: string[] = [];
  const server = new SMTPServer({
    logger: false,
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onRcptTo(address, _session, callback) {
      if (address.address === 'slow@example.com' && slowTries++ === 0)
        return callback(Object.assign(new Error('4.3.0 try later'), { responseCode: 451 }));
      callback();
    },
    onData(stream, session, callback) {
      stream.resume();
      stream.once('end', () => {
        const to = session.envelope.rcptTo.map((r) => r.address);
        delivered.push(...to);
        if (to.includes('gate@example.com')) {
          gateTaken.resolve();
          void released.promise.then(() => callback());
        } else callback();
      });
    },
  });
  const sockets = new Set<Socket>();
  server.server.on('connection', (socket: Socket) => sockets.add(socket.once('close', () => sockets.delete(socket))));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `smtp://127.0.0.1:${(server.server.address() as AddressInfo).port}`,
    gateTaken: gateTaken.promise,
    release: () => released.resolve(),
    delivered,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

forEachDatabase((dialect) => {
  let api: ApiTest | undefined;
  let peer: Awaited<ReturnType<typeof relay>> | undefined;
  afterEach(async () => {
    peer?.release();
    await api?.close();
    await peer?.close();
  });

  it('does not try again, later in the same run, an address suppressed while its message waited', async () => {
    peer = await relay();
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()), env: { EMAIL_TRANSPORT: peer.url } });
    const client = await api.client();
    const listId = await client.createList('big');
    const contacts = Array.from({ length: 500 }, (_, i) => ({
      email: `c${String(i).padStart(4, '0')}@example.com`,
      emailOptIn: true,
    }));
    const batch = await client.upsert(contacts, { listId });
    assert.equal(batch.status, 'Completed');
    // 1,000 own recipients (slow@ on page 1, gate@ on page 2) and 500 from the list: pages 1-3 full.
    const recipients = Array.from({ length: 1000 }, (_, i) => ({ to: `r${String(i).padStart(4, '0')}@example.com` }));
    recipients[0] = { to: 'slow@example.com' };
    recipients[700] = { to: 'gate@example.com' };
    const batchId = await client.accept('/email/batch', buildBatch({ listId: [listId] }, { recipients }));
    const draining = api.drain();
    await peer.gateTaken;
    // Page 1 is recorded: slow@ waits, Deferred.
    let slow = (await client.get(`/email/batch/${batchId}?status=Deferred`)).json().recipients;
    assert.deepEqual(
      slow.map((r: { email: string }) => r.email),
      ['slow@example.com'],
    );
    const added = await client.post('/email/suppressions', { email: 'slow@example.com', reason: 'asked by phone' });
    assert.equal(added.statusCode, 201, added.body);
    api.clock.advance(61_000);
    peer.release();
    await draining;
    [slow] = (await client.get(`/email/batch/${batchId}?status=Dropped`)).json().recipients;
    assert.equal(slow.email, 'slow@example.com');
    assert.match(slow.reason, /^suppressed: /);
    assert.equal(peer.delivered.filter((address) => address === 'slow@example.com').length, 0, 'never taken');
    assert.equal((await client.get(`/email/batch/${batchId}?status=Delivered&limit=1`)).json().totals.Delivered, 1499);
  });
});
