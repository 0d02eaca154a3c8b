import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { createWorker } from '../../src/server/worker.ts';
import { startSmsc, type Smsc, type SmscOptions } from '../../src/sim/smsc.ts';
import type { MessageView } from '../../src/sim/taken.ts';
import type { Worker } from '../../src/queue/worker.ts';
import { ADMIN_TOKEN, bearer } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';
import { freePort, start } from '../cli/support.ts';

// SMS over several SMSC connections (ARCHITECTURE.md, "SMS routes (operator)"): sms/transports/routed.ts,
// over two SMSC simulators on TCP.

const UK = '447911123456';
const INDIA = '919812345678';
const GERMANY = '4915123456789';

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  const simulators: Smsc[] = [];
  const workers: Worker[] = [];
  beforeEach(async () => {
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()) });
    alice = await api.client();
  });
  afterEach(async () => {
    for (const worker of [api.worker, ...workers.splice(0)]) await worker.stop();
    await api.close();
    for (const smsc of simulators.splice(0)) await smsc.close();
  });

  const admin = (method: 'POST' | 'PUT' | 'DELETE' | 'GET', url: string, payload?: object) =>
    api.t.app.inject({ method, url, headers: bearer(ADMIN_TOKEN), payload });
  /** A simulator added as the connection `name`. */
  async function connection(name: string, options: SmscOptions = {}): Promise<Smsc> {
    const smsc = await startSmsc({ systemId: 'herald', password: 'secret', receiptDelayMs: 20, ...options });
    simulators.push(smsc);
    const url = `smpp://herald:secret@127.0.0.1:${smsc.port}?binds=1&window=10`;
    const added = await admin('POST', '/admin/smsc', { name, url });
    assert.equal(added.statusCode, 201, added.body);
    return smsc;
  }
  /** A worker started now: its routed transport reads the routes as they are at its start. */
  const startWorker = () => {
    const worker = createWorker(api.t.ctx, { log: api.t.app.log });
    workers.push(worker);
    return worker;
  };
  let worker: Worker;
  /** Replaces the table, and starts the worker that sends from then on, which reads it at once. */
  const setRoutes = async (routes: object[]) => {
    const response = await admin('PUT', '/admin/sms-routes', { routes });
    assert.equal(response.statusCode, 200, response.body);
    worker = startWorker();
  };
  /** Once the worker is bound to each of `names`: a route tries a connection that is up first. */
  const up = (...names: string[]) =>
    waitFor(`${names.join(' and ')} up`, async () => {
      const { smsc } = (await admin('GET', '/admin/smsc')).json() as { smsc: Array<{ name: string; state: string }> };
      return names.every((name) => smsc.some((c) => c.name === name && c.state === 'up')) || undefined;
    });
  const taken = async (smsc: Smsc) =>
    ((await (await fetch(`http://127.0.0.1:${smsc.httpPort}/messages`)).json()) as { messages: MessageView[] }).messages
      .map((message) => message.recipient)
      .sort();
  const send = async (client: ApiClient, recipient: string, body = 'Your code is 4829', by = worker) => {
    const response = await client.post('/sms/single', { recipient, senderName: 'HERALD', body });
    assert.equal(response.statusCode, 202, response.body);
    await by.drain();
    return response.json().data.QueueId as string;
  };
  /** The recipient's status once it is final, with the connection each part went over. */
  const settled = (client: ApiClient, queueId: string) =>
    waitFor(`${queueId} settled`, async () => {
      const [recipient] = (await client.get(`/sms/${queueId}`)).json().recipients;
      if (!['Delivered', 'Failed'].includes(recipient.status)) return undefined;
      const parts = await api.t.ctx.db
        .selectFrom('sms_parts as p')
        .innerJoin('send_recipients as r', 'r.id', 'p.recipient_id')
        .select('p.smsc')
        .where('r.send_id', '=', queueId)
        .execute();
      return { status: recipient.status, error: recipient.error, smsc: parts.map((part) => part.smsc) };
    });

  it("routes by the longest prefix and an account's own routes, each over its own SMSC", async () => {
    const uk = await connection('uk');
    const eu = await connection('eu');
    const bob = await api.client();
    await setRoutes([
      { prefix: '44', smsc: ['uk'] },
      { prefix: '', smsc: ['eu'] },
      { prefix: '91', smsc: ['uk'], accountId: bob.account.row.id },
    ]);
    const states = async () =>
      (await admin('GET', '/admin/smsc')).json().smsc.map((c: { name: string; state: string }) => [c.name, c.state]);
    await waitFor('the worker bound to both before any message', async () => {
      const now = await states();
      return (
        JSON.stringify(now) ===
          JSON.stringify([
            ['default', 'sandbox'],
            ['eu', 'up'],
            ['uk', 'up'],
          ]) || undefined
      );
    });
    const sent = {
      aliceUk: await send(alice, UK),
      aliceIndia: await send(alice, INDIA),
      bobIndia: await send(bob, INDIA),
      bobGermany: await send(bob, GERMANY),
    };
    assert.deepEqual(await settled(alice, sent.aliceUk), { status: 'Delivered', error: null, smsc: ['uk'] });
    assert.deepEqual(await settled(alice, sent.aliceIndia), { status: 'Delivered', error: null, smsc: ['eu'] });
    assert.deepEqual(await settled(bob, sent.bobIndia), { status: 'Delivered', error: null, smsc: ['uk'] });
    assert.deepEqual(await settled(bob, sent.bobGermany), { status: 'Delivered', error: null, smsc: ['eu'] });
    assert.deepEqual(await taken(uk), [UK, INDIA]);
    assert.deepEqual(await taken(eu), [GERMANY, INDIA]);
  });

  it('settles each part by the receipt of its own SMSC when two SMSCs hand out the same message id', async () => {
    await connection('uk', { firstId: 7000 });
    await connection('eu', { firstId: 7000, outcomes: { UNDELIV: 1 } });
    await setRoutes([
      { prefix: '44', smsc: ['uk'] },
      { prefix: '', smsc: ['eu'] },
    ]);
    const toUk = await send(alice, UK);
    const toIndia = await send(alice, INDIA);
    const ids = await api.t.ctx.db
      .selectFrom('sms_parts')
      .select(['smsc', 'operator_message_id'])
      .orderBy('smsc')
      .execute();
    assert.deepEqual(
      ids.map((part) => [part.smsc, part.operator_message_id]),
      [
        ['eu', '7000'],
        ['uk', '7000'],
      ],
      'the same id from both',
    );
    assert.deepEqual(await settled(alice, toUk), { status: 'Delivered', error: null, smsc: ['uk'] });
    const india = await settled(alice, toIndia);
    assert.deepEqual([india.status, india.smsc], ['Failed', ['eu']]);
  });

  it('records the price at submit with each message, its cost in /usage, unchanged by a later price', async () => {
    assert.equal((await admin('POST', '/admin/smsc', { name: 'lab', url: 'sandbox:' })).statusCode, 201);
    await setRoutes([
      { prefix: '91', smsc: ['lab'], pricePerPart: '0.0075', currency: 'EUR' },
      { prefix: '44', smsc: ['lab'], pricePerPart: '0.05', currency: 'USD' },
      { prefix: '', smsc: ['lab'] },
    ]);
    const read = async (queueId: string) => {
      const [recipient] = (await alice.get(`/sms/${queueId}`)).json().recipients;
      return { status: recipient.status, parts: recipient.parts, smsc: recipient.smsc, price: recipient.price };
    };
    const oneEuroPart = await send(alice, INDIA);
    const twoEuroParts = await send(alice, '919812300001', 'x'.repeat(200));
    const dollars = await send(alice, UK);
    const free = await send(alice, GERMANY);
    const eur = (amount: string) => ({ amount, currency: 'EUR' });
    assert.deepEqual(await read(oneEuroPart), { status: 'Delivered', parts: 1, smsc: 'lab', price: eur('0.0075') });
    assert.deepEqual(await read(twoEuroParts), { status: 'Delivered', parts: 2, smsc: 'lab', price: eur('0.015') });
    assert.deepEqual((await read(dollars)).price, { amount: '0.05', currency: 'USD' });
    assert.deepEqual((await read(free)).price, null, 'a route with no price');

    const running = worker;
    await setRoutes([{ prefix: '91', smsc: ['lab'], pricePerPart: '0.01', currency: 'EUR' }]);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const later = await send(alice, '919812300002', undefined, running);
    assert.deepEqual((await read(later)).price, eur('0.01'), 'the new price, for a message sent after the change');
    assert.deepEqual((await read(oneEuroPart)).price, eur('0.0075'), 'not for one sent before');

    const today = new Date(api.clock.now()).toISOString().slice(0, 10);
    const usage = (await alice.get(`/usage?from=${today}&to=${today}`)).json();
    const cost = [eur('0.0325'), { amount: '0.05', currency: 'USD' }];
    assert.deepEqual(usage.totals.cost, cost);
    assert.deepEqual(usage.days[0].cost, cost);
    const csv = (await alice.get(`/usage?from=${today}&to=${today}&format=csv`)).body.split('\r\n');
    assert.ok(csv[0].startsWith('date,sms_messages,sms_parts_gsm7,sms_parts_ucs2,email_messages,cost_eur,cost_usd,'));
    assert.ok(csv[1].startsWith(`${today},5,6,0,0,0.0325,0.05,`), csv[1]);
    const bob = await api.client();
    assert.deepEqual(
      (await bob.get(`/usage?from=${today}&to=${today}`)).json().totals.cost,
      [],
      "not another account's",
    );
  });

  it('moves a message an SMSC refuses for now to the next connection of its route, at once', async () => {
    const first = await connection('first', { rejectDestinations: /^91/, rejectStatus: 0x08 });
    const second = await connection('second');
    await setRoutes([{ prefix: '', smsc: ['first', 'second'] }]);
    await up('first', 'second');
    const queueId = await send(alice, INDIA);
    assert.deepEqual(await settled(alice, queueId), { status: 'Delivered', error: null, smsc: ['second'] });
    assert.deepEqual(await taken(first), []);
    assert.deepEqual(await taken(second), [INDIA]);
  });

  it('routes past a connection this worker cannot open, and keeps one no route names bound', async () => {
    // Its `ca=` file there when it was added, and gone since from where the worker runs.
    const dir = mkdtempSync(join(tmpdir(), 'herald-ca-'));
    const ca = join(dir, 'ca.pem');
    writeFileSync(ca, rootCertificates[0]);
    const far = `smpps://herald:secret@127.0.0.1:1?ca=${encodeURIComponent(ca)}`;
    const added = await admin('POST', '/admin/smsc', { name: 'far', url: far });
    assert.equal(added.statusCode, 201, added.body);
    rmSync(dir, { recursive: true });
    const uk = await connection('uk');
    // Named by no route: its receipts come over its own binds only.
    await connection('spare');
    await setRoutes([{ prefix: '', smsc: ['far', 'uk'] }]);
    await up('uk', 'spare');
    const queueId = await send(alice, UK);
    assert.deepEqual(await settled(alice, queueId), { status: 'Delivered', error: null, smsc: ['uk'] });
    assert.deepEqual(await taken(uk), [UK]);
  });

  it('fails a message an SMSC refuses for good, without trying the next connection', async () => {
    await connection('first', { rejectDestinations: /^91/ });
    const second = await connection('second');
    await setRoutes([{ prefix: '', smsc: ['first', 'second'] }]);
    await up('first', 'second');
    const queueId = await send(alice, INDIA);
    const outcome = await settled(alice, queueId);
    assert.equal(outcome.status, 'Failed');
    assert.match(outcome.error, /refused the message \(command_status 0x0000000B\)/);
    assert.deepEqual(await taken(second), []);
  });

  it('sends over the next connection while the first has lost its binds and they do not come back', async () => {
    const first = await connection('first');
    const second = await connection('second');
    await setRoutes([{ prefix: '', smsc: ['first', 'second'] }]);
    await up('first', 'second');
    assert.deepEqual((await settled(alice, await send(alice, INDIA))).smsc, ['first'], 'the first, while it is up');
    await first.close();
    const queueId = await send(alice, GERMANY);
    assert.deepEqual(await settled(alice, queueId), { status: 'Delivered', error: null, smsc: ['second'] });
    assert.deepEqual(await taken(second), [GERMANY]);
  });

  it('moves messages waiting on a connection that lost its binds to the next after 10 s', {
    timeout: 60_000,
  }, async () => {
    // One submit a second: the rest of the batch waits, throttled, on the first connection.
    const first = await connection('first', { tps: 1 });
    const second = await connection('second');
    await setRoutes([{ prefix: '', smsc: ['first', 'second'] }]);
    await up('first', 'second');
    const response = await alice.post('/sms/batch', {
      senderName: 'HERALD',
      body: 'Our sale starts today',
      recipients: [INDIA, GERMANY, UK].map((mobileNo) => ({ mobileNo })),
    });
    assert.equal(response.statusCode, 202, response.body);
    const running = worker.drain();
    await waitFor('the first submit at the first SMSC', async () =>
      first.stats().submits.accepted > 0 ? true : undefined,
    );
    const lost = Date.now();
    await first.close();
    await running;
    const moved = await taken(second);
    assert.equal(moved.length, 2, `the two still waiting moved: ${moved}`);
    const waited = Date.now() - lost;
    assert.ok(waited >= 9_000 && waited < 20_000, `after about 10 s: not at once, nor the last's 30 s (${waited} ms)`);
  });

  it('fails a number no route matches with `no route` once connections exist and SMS_TRANSPORT is unset', async () => {
    const uk = await connection('uk');
    await setRoutes([{ prefix: '44', smsc: ['uk'] }]);
    const queueId = await send(alice, INDIA);
    assert.deepEqual(await settled(alice, queueId), { status: 'Failed', error: 'no route', smsc: [] });
    assert.deepEqual(await taken(uk), []);
    assert.deepEqual((await alice.get('/sandbox/sms')).json().messages, [], 'never delivered by the sandbox');
  });

  if (dialect === 'postgres') {
    it('applies a route change in two running worker processes within 5 s, with no restart', async (t) => {
      // Only the two processes send, and bind: this process's worker stops.
      await api.worker.stop();
      const before = await connection('before');
      const after = await connection('after');
      const routed = await admin('PUT', '/admin/sms-routes', { routes: [{ prefix: '', smsc: ['before'] }] });
      assert.equal(routed.statusCode, 200, routed.body);
      const env = {
        DATABASE_URL: api.t.database.url,
        ENCRYPTION_KEY: api.t.ctx.encryptionKey.current.export().toString('hex'),
        SMS_TRANSPORT: '',
      };
      const processes = await Promise.all(
        [1, 2].map(async () => start(['serve', '--role', 'worker'], { ...env, WORKER_PORT: String(await freePort()) })),
      );
      t.after(() => {
        for (const { child } of processes) child.kill('SIGKILL');
      });
      const binds = (smsc: Smsc) => smsc.stats().binds.open;
      // Every connection is bound, named by a route or not (its receipts come over its own binds).
      await waitFor('each process bound to both', async () => (binds(before) === 2 && binds(after) === 2) || undefined);
      const sendAll = async (recipients: string[]) => {
        const ids = [];
        for (const recipient of recipients) {
          const response = await alice.post('/sms/single', {
            recipient,
            senderName: 'HERALD',
            body: 'Your code is 4829',
          });
          assert.equal(response.statusCode, 202, response.body);
          ids.push(response.json().data.QueueId as string);
        }
        return Promise.all(ids.map(async (id) => (await settled(alice, id)).smsc));
      };
      const first = ['447911000001', '447911000002', '447911000003', '447911000004'];
      assert.deepEqual(await sendAll(first), [['before'], ['before'], ['before'], ['before']]);

      const response = await admin('PUT', '/admin/sms-routes', { routes: [{ prefix: '', smsc: ['after'] }] });
      assert.equal(response.statusCode, 200, response.body);
      const changed = Date.now();
      await new Promise((resolve) => setTimeout(resolve, changed + 5_000 - Date.now()));
      const second = ['447911000005', '447911000006', '447911000007', '447911000008'];
      assert.deepEqual(await sendAll(second), [['after'], ['after'], ['after'], ['after']]);
      assert.deepEqual(await taken(before), first);
      assert.deepEqual(await taken(after), second);
      for (const { child } of processes) child.kill('SIGTERM');
      const codes = await Promise.all(processes.map(async ({ child }) => (await once(child, 'exit'))[0]));
      assert.deepEqual(codes, [0, 0]);
    });
  }

  it('applies a route change in every running worker within 5 s, with no restart', async () => {
    const before = await connection('before');
    const after = await connection('after');
    await setRoutes([{ prefix: '', smsc: ['before'] }]);
    const [one, other] = [worker, startWorker()];
    await settled(alice, await send(alice, INDIA, undefined, one));
    await settled(alice, await send(alice, GERMANY, undefined, other));
    assert.deepEqual(await taken(before), [GERMANY, INDIA]);

    await setRoutes([{ prefix: '', smsc: ['after'] }]);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    assert.deepEqual((await settled(alice, await send(alice, INDIA, undefined, one))).smsc, ['after']);
    assert.deepEqual((await settled(alice, await send(alice, GERMANY, undefined, other))).smsc, ['after']);
    assert.deepEqual(await taken(after), [GERMANY, INDIA]);
  });
});
