import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, it } from 'node:test';
import smpp from 'smpp';
import { ManualClock } from '../../src/clock.ts';
import type { Worker } from '../../src/queue/worker.ts';
import { createWorker } from '../../src/server/worker.ts';
import { ADMIN_TOKEN, bearer } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';

type Pdu = InstanceType<typeof smpp.PDU>;

/**
 * A multipart SMS whose SMSC takes part 1 and refuses part 2 for good (ESME_RINVDSTADR): the
 * message is Failed, and the part the operator took is billed — in its price, its send's
 * partsBilled and GET /usage — as an operator charges for every part it took (docs/sms.md).
 * An SMSC of the test's own, over TCP, that refuses part 2 of every message and reports part 1
 * delivered.
 */
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let worker: Worker;
  let server: ReturnType<typeof smpp.createServer>;
  let port: number;
  /** The part the SMSC refuses of every message; it takes the others. */
  let refusedPart: number;
  beforeEach(async () => {
    refusedPart = 2;
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()) });
    alice = await api.client();
    let ids = 0;
    server = smpp.createServer((session) => {
      session.on('error', () => {});
      session.on('pdu', (pdu: Pdu) => {
        if (pdu.command !== 'submit_sm') {
          if (!pdu.isResponse()) session.send(pdu.response());
          return;
        }
        const concatenation = pdu.short_message?.udh?.find((ie) => ie[0] === 0x00);
        const part = concatenation ? concatenation[4] : 1;
        if (part === refusedPart) {
          session.send(pdu.response({ command_status: 0x0b }));
          return;
        }
        ids += 1;
        const id = String(7000 + ids);
        session.send(pdu.response({ message_id: id }));
        setTimeout(() => {
          session.deliver_sm({
            source_addr: pdu.destination_addr,
            destination_addr: pdu.source_addr,
            esm_class: 0x04,
            short_message: `id:${id} sub:001 dlvrd:001 stat:DELIVRD err:000 text:`,
          });
        }, 50);
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  afterEach(async () => {
    for (const w of [api.worker, worker]) await w?.stop();
    await api.close();
    server.close();
  });

  const admin = (method: 'POST' | 'PUT' | 'GET', url: string, payload?: object) =>
    api.t.app.inject({ method, url, headers: bearer(ADMIN_TOKEN), payload });

  async function setUp(window = 1) {
    const added = await admin('POST', '/admin/smsc', {
      name: 'eu',
      url: `smpp://herald:secret@127.0.0.1:${port}?binds=1&window=${window}`,
    });
    assert.equal(added.statusCode, 201, added.body);
    const routes = await admin('PUT', '/admin/sms-routes', {
      routes: [{ prefix: '', smsc: ['eu'], pricePerPart: '0.0075', currency: 'EUR' }],
    });
    assert.equal(routes.statusCode, 200, routes.body);
    worker = createWorker(api.t.ctx, { log: api.t.app.log });
    await waitFor('eu up', async () => {
      const { smsc } = (await admin('GET', '/admin/smsc')).json() as { smsc: Array<{ name: string; state: string }> };
      return smsc.some((c) => c.name === 'eu' && c.state === 'up') || undefined;
    });
  }

  const TWO_PARTS = 'x'.repeat(200);

  for (const path of ['/sms/batch', '/sms/single'] as const) {
    it(`bills the part the SMSC took of a ${path} message whose other part it refused for good`, async () => {
      await setUp();
      const recipient = '919812300071';
      const body =
        path === '/sms/batch'
          ? { recipients: [{ mobileNo: recipient }], senderName: 'HERALD', body: TWO_PARTS }
          : { recipient, senderName: 'HERALD', body: TWO_PARTS };
      const response = await alice.post(path, body);
      assert.equal(response.statusCode, 202, response.body);
      await worker.drain();
      const queueId = response.json().data.QueueId as string;
      const read = async () => (await alice.get(`/sms/${queueId}`)).json();
      const view = await waitFor('its outcome', async () => {
        const v = await read();
        return v.recipients[0].status === 'Queued' ? undefined : v;
      });
      const [r] = view.recipients;
      assert.deepEqual(
        { status: r.status, parts: r.parts, errorCode: r.errorCode, price: r.price },
        { status: 'Failed', parts: 2, errorCode: '0x0000000B', price: { amount: '0.0075', currency: 'EUR' } },
        'Failed, priced for the one part the SMSC took',
      );
      assert.equal(view.partsBilled, 1, 'partsBilled: the one part the SMSC took');
      const today = new Date(api.clock.now()).toISOString().slice(0, 10);
      const usage = (await alice.get(`/usage?from=${today}&to=${today}`)).json().totals;
      assert.deepEqual(
        { messages: usage.sms.messages, parts: usage.sms.parts, cost: usage.cost },
        { messages: 1, parts: { gsm7: 1, ucs2: 0 }, cost: [{ amount: '0.0075', currency: 'EUR' }] },
        'GET /usage bills the part the SMSC took',
      );
      assert.deepEqual(
        r.history.map((h: { status: string }) => h.status),
        ['Queued', 'Submitted', 'Failed'],
      );
      // Part 1's receipt (DELIVRD) is applied to its part and leaves the message Failed.
      const after = await waitFor('the receipt of part 1', async () => {
        const v = await read();
        return v.recipients[0].partStatus[0]?.status === 'Delivered' ? v : undefined;
      });
      assert.deepEqual(after.recipients[0].partStatus, [{ part: 1, operatorMessageId: '7001', status: 'Delivered' }]);
      assert.deepEqual([after.recipients[0].status, after.recipients[0].smsc, after.partsBilled], ['Failed', 'eu', 1]);
    });
  }

  it('records a part the SMSC took after refusing an earlier one under its own number', async () => {
    // Window 2: part 2 is in flight when part 1 is refused, and the SMSC takes it.
    refusedPart = 1;
    await setUp(2);
    const response = await alice.post('/sms/batch', {
      recipients: [{ mobileNo: '919812300072' }],
      senderName: 'HERALD',
      body: TWO_PARTS,
    });
    assert.equal(response.statusCode, 202, response.body);
    await worker.drain();
    const queueId = response.json().data.QueueId as string;
    const view = await waitFor('the receipt of part 2', async () => {
      const v = (await alice.get(`/sms/${queueId}`)).json();
      return v.recipients[0].partStatus[0]?.status === 'Delivered' ? v : undefined;
    });
    const [r] = view.recipients;
    assert.deepEqual(r.partStatus, [{ part: 2, operatorMessageId: '7001', status: 'Delivered' }]);
    assert.deepEqual([r.status, r.price, view.partsBilled], ['Failed', { amount: '0.0075', currency: 'EUR' }, 1]);
  });
});
