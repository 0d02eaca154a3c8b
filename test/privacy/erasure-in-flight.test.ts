import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, it } from 'node:test';
import smpp from 'smpp';
import { SMTPServer } from 'smtp-server';
import { ManualClock } from '../../src/clock.ts';
import { createWorker } from '../../src/server/worker.ts';
import { erasureKey } from '../../src/messaging/erased-identifiers.ts';
import { eraseChunk } from '../../src/privacy/erasures.ts';
import { waitForLockWait } from '../support/wait.ts';
import { watchPostgres } from '../support/postgres-wire.ts';
import { GATHER_WINDOW_MS } from '../../src/webhooks/events.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';
import { base64 } from '../email/support.ts';

type Pdu = InstanceType<typeof smpp.PDU>;

/**
 * A page already in the SMSC's or the relay's hands when an erasure of its recipient commits:
 * its answer comes after, and its record must neither undo the erasure nor write the person's
 * number or address again, in the recipient's row, an event or a suppression
 * (docs/privacy.md, "Erasure").
 */

/** A peer that takes each message and holds its answer until `release`; `taken` resolves at the first. */
interface HoldingPeer {
  url: string;
  taken: Promise<void>;
  release(): void;
  close(): Promise<void>;
}

/** An SMSC holding every submit_sm's response. */
async function holdingSmsc(): Promise<HoldingPeer> {
  const taken = Promise.withResolvers<void>();
  const released = Promise.withResolvers<void>();
  let next = 0;
  const sessions: Array<InstanceType<typeof smpp.Session>> = [];
  const server = smpp.createServer((session) => {
    sessions.push(session);
    session.on('error', () => {});
    session.on('pdu', (pdu: Pdu) => {
      if (pdu.command === 'submit_sm') {
        taken.resolve();
        void released.promise.then(() => session.send(pdu.response({ message_id: `held-${++next}` })));
      } else if (pdu.command_id < 0x80000000) session.send(pdu.response());
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `smpp://herald:secret@127.0.0.1:${(server.address() as AddressInfo).port}?binds=1`,
    taken: taken.promise,
    release: () => released.resolve(),
    close: async () => {
      for (const session of sessions) session.socket.destroy();
      server.close();
    },
  };
}

/** A relay holding the reply to each message's data, then refusing it for good: the address unknown. */
async function holdingRelay(): Promise<HoldingPeer> {
  const taken = Promise.withResolvers<void>();
  const released = Promise.withResolvers<void>();
  const server = new SMTPServer({
    logger: false,
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, _session, callback) {
      stream.resume();
      stream.once('end', () => {
        taken.resolve();
        void released.promise.then(() =>
          callback(Object.assign(new Error('5.1.1 no such user'), { responseCode: 550 })),
        );
      });
    },
  });
  const sockets = new Set<Socket>();
  server.server.on('connection', (socket: Socket) => sockets.add(socket.once('close', () => sockets.delete(socket))));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `smtp://127.0.0.1:${(server.server.address() as AddressInfo).port}`,
    taken: taken.promise,
    release: () => released.resolve(),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

forEachDatabase((dialect) => {
  let api: ApiTest | undefined;
  let peer: HoldingPeer | undefined;
  afterEach(async () => {
    peer?.release();
    await api?.worker.stop();
    await api?.close();
    await peer?.close();
    api = undefined;
    peer = undefined;
  });

  const NUMBER = '919812300001';
  const ADDRESS = 'ada@example.com';
  const HOOK = 'http://127.0.0.1:9/hook';

  const cases = [
    {
      name: '/sms/single',
      start: holdingSmsc,
      env: (url: string) => ({ SMS_TRANSPORT: url }),
      erase: { mobile: NUMBER },
      identifier: NUMBER,
      request: {
        path: '/sms/single',
        body: { recipient: NUMBER, senderName: 'HERALD', body: 'Code 4829', webHookUrl: HOOK },
      },
    },
    {
      name: '/sms/batch',
      start: holdingSmsc,
      env: (url: string) => ({ SMS_TRANSPORT: url }),
      erase: { mobile: NUMBER },
      identifier: NUMBER,
      request: {
        path: '/sms/batch',
        body: { recipients: [{ mobileNo: NUMBER }], senderName: 'HERALD', body: 'Sale today', webHookUrl: HOOK },
      },
    },
    {
      name: '/email/batch',
      start: holdingRelay,
      env: (url: string) => ({ EMAIL_TRANSPORT: url }),
      erase: { email: ADDRESS },
      identifier: ADDRESS,
      request: {
        path: '/email/batch',
        body: {
          sendingDetails: {
            senderFrom: { email: 'news@mail.localhost', displayName: 'Herald News' },
            subject: 'Hello',
            emailBody: base64('<p>Hello</p>'),
            webHookUrl: HOOK,
          },
          recipients: [{ to: ADDRESS }],
        },
      },
    },
  ];

  for (const c of cases)
    it(`records nothing naming the person, erased while ${c.name}'s page was handed over`, async () => {
      peer = await c.start();
      api = await startApiTest(dialect, { clock: new ManualClock(Date.now()), env: c.env(peer.url) });
      const alice: ApiClient = await api.client();
      const accepted = await alice.post(c.request.path, c.request.body);
      assert.equal(accepted.statusCode, 202, accepted.body);
      const sending = api.drain();
      await peer.taken;

      const erasure = await alice.post('/privacy/erasures', c.erase);
      assert.equal(erasure.statusCode, 202, erasure.body);
      // The erasure's job runs to its end while the page is still out, as another worker would.
      const other = createWorker(api.t.ctx, { log: api.t.app.log });
      await other.drain();
      await other.stop();
      const { erasureId } = erasure.json();
      assert.equal((await alice.get(`/privacy/erasures/${erasureId}`)).json().status, 'Completed');

      peer.release();
      await sending;

      const { db } = api.t.ctx;
      const [row] = await db
        .selectFrom('send_recipients')
        .select(['send_recipients.id', 'send_recipients.status', 'reason', 'address'])
        .innerJoin('sends', 'sends.id', 'send_recipients.send_id')
        .where('sends.account_id', '=', alice.account.row.id)
        .execute();
      assert.equal(row.reason, 'erased');
      assert.equal(row.status, c.name === '/email/batch' ? 'Dropped' : 'NotSent');
      assert.match(row.address, /^erased:/);
      const history = await db
        .selectFrom('recipient_history')
        .select('status')
        .where('recipient_id', '=', row.id)
        .execute();
      assert.deepEqual(
        history.map((h) => h.status),
        [row.status],
      );
      const named = async (table: 'webhook_events' | 'webhook_deliveries', column: 'events' | 'payload') =>
        (await db.selectFrom(table).select(column).execute())
          .map((r) => String((r as Record<string, unknown>)[column]))
          .filter((text) => text.includes(c.identifier));
      assert.deepEqual(await named('webhook_events', 'events'), []);
      assert.deepEqual(await named('webhook_deliveries', 'payload'), []);
      const suppressed = await db
        .selectFrom('suppressions')
        .select('address')
        .where('account_id', '=', alice.account.row.id)
        .execute();
      assert.deepEqual(suppressed, []);
      if (c.name !== '/email/batch') {
        const parts = await db.selectFrom('sms_parts').select('part').where('recipient_id', '=', row.id).execute();
        assert.deepEqual(parts, []);
      }
    });

  it('ends, in its job, a message written after the erasure from a check of the address made before it', async () => {
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()), env: { SMS_TRANSPORT: 'sandbox:' } });
    const alice = await api.client();
    const queueId = await alice.accept('/sms/batch', {
      recipients: [{ mobileNo: NUMBER }],
      senderName: 'HERALD',
      body: 'Sale tomorrow',
      scheduleDateTime: new Date(api.clock.now() + 3_600_000).toISOString(),
    });
    const erasure = await alice.post('/privacy/erasures', { mobile: NUMBER });
    assert.equal(erasure.statusCode, 202, erasure.body);
    // As a send whose address was checked before the erasure committed, and written after, holds it.
    const { db } = api.t.ctx;
    await db
      .updateTable('send_recipients')
      .set({ status: 'Queued', reason: null, address: NUMBER })
      .where('send_id', '=', queueId)
      .execute();
    await api.drain();
    const [recipient] = (await alice.get(`/sms/${queueId}`)).json().recipients;
    assert.equal(recipient.status, 'NotSent');
    assert.match(recipient.recipient, /^erased:/);
    const { erased } = (await alice.get(`/privacy/erasures/${erasure.json().erasureId}`)).json();
    assert.equal(erased.messages, 2);
  });

  it('writes a stream of waiting events over only as it read it, when a gather cut it meanwhile', async () => {
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()) });
    const alice = await api.client();
    const { db } = api.t.ctx;
    const event = (recipient: string, status: string) => ({ recipient, status });
    const appended = [event(NUMBER, 'Submitted'), event(NUMBER, 'Delivered'), event('919812300009', 'Submitted')];
    const { id } = await db
      .insertInto('webhook_events')
      .values({
        account_id: alice.account.row.id,
        type: 'sms.status',
        url: HOOK,
        events: JSON.stringify(appended),
        event_count: 3,
        created_at: 0,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    // A gather taking the first two, its transaction not yet committed as the erasure reads.
    const cut = Promise.withResolvers<void>();
    const committing = Promise.withResolvers<void>();
    const gather = db.transaction().execute(async (trx) => {
      await trx
        .updateTable('webhook_events')
        .set({ events: JSON.stringify(appended.slice(2)), event_count: 1 })
        .where('id', '=', id)
        .execute();
      cut.resolve();
      await committing.promise;
    });
    await cut.promise;
    const args = {
      accountId: alice.account.row.id,
      erasureId: randomUUID(),
      erasureKey: await erasureKey(db, api.t.ctx.encryptionKey),
      mobiles: [NUMBER, '919812300009'],
      emails: [],
      now: api.clock.now(),
      step: 'webhookEvents',
      after: null,
    };
    let settled = false;
    const erasing = api.t.ctx.database.call(eraseChunk, args).finally(() => (settled = true));
    if (dialect === 'postgres') await waitForLockWait(db, 'the erasure to wait for the gather', () => settled);
    committing.resolve();
    await gather;
    await erasing;
    const { events } = await db
      .selectFrom('webhook_events')
      .select('events')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    const left = JSON.parse(events) as Array<{ recipient: string; status: string }>;
    assert.equal(left.length, 1, 'the events the gather took are not written back');
    assert.match(left[0].recipient, /^erased:/);
  });

  it('keeps nothing in clear of the events a gather read before an erasure wrote them over', async () => {
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()), env: { SMS_TRANSPORT: 'sandbox:' } });
    const alice = await api.client();
    const { db } = api.t.ctx;
    await alice.accept('/sms/single', { recipient: NUMBER, senderName: 'HERALD', body: 'Code 4829', webHookUrl: HOOK });
    await api.drain();
    // The gather waits its window; once it has read the stream, its delete is held back (PostgreSQL).
    const read = Promise.withResolvers<void>();
    const release = Promise.withResolvers<void>();
    watchPostgres((text) => {
      if (!text.startsWith('delete from "webhook_events"')) return;
      read.resolve();
      return release.promise;
    });
    try {
      api.clock.advance(GATHER_WINDOW_MS);
      const draining = api.drain();
      if (dialect === 'postgres') await read.promise;
      else await draining;
      const args = {
        accountId: alice.account.row.id,
        erasureId: randomUUID(),
        erasureKey: await erasureKey(db, api.t.ctx.encryptionKey),
        mobiles: [NUMBER],
        emails: [],
        now: api.clock.now(),
        after: null,
      };
      let settled = false;
      const erasing = (async () => {
        for (const step of ['webhookEvents', 'webhookDeliveries']) {
          await api!.t.ctx.database.call(eraseChunk, { ...args, step });
        }
      })().finally(() => (settled = true));
      if (dialect === 'postgres') await waitForLockWait(db, 'the erasure to wait for the gather', () => settled);
      release.resolve();
      await draining;
      await erasing;
    } finally {
      watchPostgres(undefined);
    }
    const delivered = await db.selectFrom('webhook_deliveries').select('payload').execute();
    assert.ok(delivered.length > 0, 'the gather made its deliveries');
    const waiting = await db.selectFrom('webhook_events').select('events').execute();
    assert.deepEqual(
      [...delivered.map((row) => row.payload), ...waiting.map((row) => row.events)].filter((text) =>
        text.includes(NUMBER),
      ),
      [],
    );
  });
});
