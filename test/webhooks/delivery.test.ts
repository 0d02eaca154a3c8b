import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { afterEach, beforeEach, it } from 'node:test';
import { createSecretKey, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../src/clock.ts';
import { seal } from '../../src/sealed.ts';
import { SnoozeJob, Worker, type Job, type JobHandler } from '../../src/queue/worker.ts';
import { webhookDeliveryHandler, type DeliveryOptions } from '../../src/webhooks/deliver.ts';
import { systemResolver } from '../../src/webhooks/destination.ts';
import { DELIVER_KIND, emitWebhook } from '../../src/webhooks/outbox.ts';
import { RETRY_DELAYS_MS } from '../../src/webhooks/schedule.ts';
import { ensureSecret, newSecret, rotateSecret, PREVIOUS_SECRET_TTL_MS } from '../../src/webhooks/secrets.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startTestApp, type TestAccount, type TestApp } from '../support/app.ts';
import { runDeliveryJob, startReceiver, type Receiver } from './support.ts';
import { waitFor } from '../support/wait.ts';

forEachDatabase((dialect) => {
  let t: TestApp;
  let account: TestAccount;
  let receiver: Receiver;
  beforeEach(async () => {
    // Standard Webhooks verifiers check webhook-timestamp against the real time (±5 min),
    // so the manual clock starts at the real time; tests move it on from there.
    t = await startTestApp(dialect, { clock: new ManualClock(Date.now()) });
    account = await t.createAccount();
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await receiver.close();
    await t.close();
  });

  const handlerFor = (options: DeliveryOptions & { allowPrivate?: boolean } = {}): JobHandler =>
    webhookDeliveryHandler({ ...t.ctx, config: { webhookAllowPrivate: options.allowPrivate ?? true } }, options);

  const emit = (url = receiver.url, data: unknown = { queueId: 'q-1', status: 'Delivered' }) =>
    t.ctx.db
      .transaction()
      .execute((trx) => emitWebhook(trx, t.clock, { accountId: account.row.id, url, type: 'sms.status', data }));

  const delivery = (id: string) =>
    t.ctx.db.selectFrom('webhook_deliveries').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  const attempt = (handler: JobHandler, id: string) => runDeliveryJob(handler, t.ctx.db, id);

  it(
    'posts {type, timestamp, data} signed per Standard ' + 'Webhooks, verified by the standardwebhooks package',
    async () => {
      const id = await emit();
      assert.equal(await attempt(handlerFor(), id), 'done');

      assert.equal(receiver.received.length, 1);
      const [post] = receiver.received;
      assert.equal(post.headers['webhook-id'], id);
      assert.equal(post.headers['webhook-timestamp'], String(Math.floor(t.clock.now() / 1000)));
      assert.match(post.headers['webhook-signature'] as string, /^v1,[A-Za-z0-9+/]+=*$/);
      assert.equal(post.headers['content-type'], 'application/json');
      assert.equal(post.headers['user-agent'], 'Herald');

      const { secret } = await ensureSecret(t.ctx.db, t.ctx.encryptionKey, t.clock, account.row.id);
      assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      const payload = new Webhook(secret).verify(post.body, post.headers as Record<string, string>);
      assert.deepEqual(payload, {
        type: 'sms.status',
        timestamp: new Date(t.clock.now()).toISOString(),
        data: { queueId: 'q-1', status: 'Delivered' },
      });

      const row = await delivery(id);
      assert.equal(row.status, 'delivered');
      assert.equal(row.attempts, 1);
      assert.equal(row.last_status_code, 200);
      assert.equal(row.delivered_at, t.clock.now());
      assert.equal(row.next_attempt_at, null);
    },
  );

  it('posts nothing, and says why, while the account’s secret was sealed under a key no longer held', async () => {
    const id = await emit();
    const lost = seal(createSecretKey(randomBytes(32)), 'whsec_lost', `webhook_secrets:${account.row.id}`);
    await t.ctx.db
      .insertInto('webhook_secrets')
      .values({ account_id: account.row.id, sealed_secret: lost, created_at: t.clock.now() })
      .execute();
    assert.equal(await attempt(handlerFor(), id), 'retry');
    const row = await delivery(id);
    assert.deepEqual([row.status, receiver.received.length], ['pending', 0]);
    // The receiver was never reached: the error is the secret's, not a connection's.
    assert.match(
      row.last_error!,
      /^The webhook secret was sealed under an ENCRYPTION_KEY this service no longer holds/,
    );
  });

  it('retries a 500 after 5 s and delivers exactly once, with the same webhook-id and body', async () => {
    const handler = handlerFor();
    const id = await emit();
    receiver.reply({ status: 500 });
    const firstAt = t.clock.now();
    assert.equal(await attempt(handler, id), 'retry');
    let row = await delivery(id);
    assert.equal(row.status, 'pending');
    assert.equal(row.attempts, 1);
    assert.equal(row.last_status_code, 500);
    assert.equal(row.last_error, 'the receiver answered 500');
    assert.equal(row.next_attempt_at, firstAt + 5_000);

    t.clock.advance(5_000);
    assert.equal(await attempt(handler, id), 'done');
    // The job run again (a lease lapsing after the post) must not post a delivered event twice.
    assert.equal(await attempt(handler, id), 'done');

    assert.equal(receiver.received.length, 2);
    assert.equal(receiver.received[0].headers['webhook-id'], receiver.received[1].headers['webhook-id']);
    assert.equal(receiver.received[0].body, receiver.received[1].body);
    row = await delivery(id);
    assert.equal(row.status, 'delivered');
    assert.equal(row.attempts, 2);
    assert.equal(row.last_status_code, 200);
    assert.equal(row.last_error, null);
  });

  it(
    'waits as long as Retry-After asks when that is later than ' + 'the schedule, in seconds or as an HTTP date',
    async () => {
      const handler = handlerFor();
      const id = await emit();

      receiver.reply({ status: 429, headers: { 'retry-after': '120' } });
      assert.equal(await attempt(handler, id), 'retry');
      assert.equal((await delivery(id)).next_attempt_at, t.clock.now() + 120_000);

      t.clock.advance(120_000);
      const inTwoHours = new Date(Math.ceil(t.clock.now() / 1000) * 1000 + 2 * 3_600_000);
      receiver.reply({ status: 503, headers: { 'retry-after': inTwoHours.toUTCString() } });
      assert.equal(await attempt(handler, id), 'retry');
      assert.equal((await delivery(id)).next_attempt_at, inTwoHours.getTime());

      // A Retry-After sooner than the schedule does not hurry it: the third wait is 30 min.
      t.clock.set(inTwoHours.getTime());
      receiver.reply({ status: 503, headers: { 'retry-after': '1' } });
      assert.equal(await attempt(handler, id), 'retry');
      assert.equal((await delivery(id)).next_attempt_at, t.clock.now() + 30 * 60_000);
    },
  );

  it(
    'follows the schedule 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 ' + 'h, 20 h, 24 h, then gives up after ten attempts',
    async () => {
      const handler = handlerFor();
      const id = await emit();
      for (const delay of RETRY_DELAYS_MS) {
        receiver.reply({ status: 502 });
        assert.equal(await attempt(handler, id), 'retry');
        assert.equal((await delivery(id)).next_attempt_at, t.clock.now() + delay);
        t.clock.advance(delay);
      }
      receiver.reply({ status: 502 });
      assert.equal(await attempt(handler, id), 'done');
      const row = await delivery(id);
      assert.equal(row.status, 'failed');
      assert.equal(row.attempts, 10);
      assert.equal(row.next_attempt_at, null);
      assert.equal(row.last_error, 'the receiver answered 502; gave up after 10 attempts');
      assert.equal(receiver.received.length, 10);
    },
  );

  it("warns when it gives a delivery up, naming the account and receiver's host, not its path or query", async () => {
    const warnings: Array<[object, string]> = [];
    const warn = (fields: object, message: string) => void warnings.push([fields, message]);
    const log = { info() {}, error() {}, warn };
    const config = { webhookAllowPrivate: true };
    const handler = webhookDeliveryHandler({
      db: t.ctx.db,
      clock: t.clock,
      config,
      encryptionKey: t.ctx.encryptionKey,
      log,
    });
    const id = await emit(`${receiver.url}/s3cret-path?key=s3cret-query`);
    for (const delay of RETRY_DELAYS_MS) {
      receiver.reply({ status: 502 });
      await attempt(handler, id);
      t.clock.advance(delay);
    }
    assert.deepEqual(warnings, [], 'nothing while it retries');
    receiver.reply({ status: 502 });
    assert.equal(await attempt(handler, id), 'done');
    assert.deepEqual(warnings, [
      [
        {
          accountId: account.row.id,
          deliveryId: id,
          host: `127.0.0.1:${receiver.port}`,
          attempts: 10,
          error: 'the receiver answered 502; gave up after 10 attempts',
        },
        `webhook delivery given up; POST /webhooks/deliveries/${id}/retry posts it again`,
      ],
    ]);
    assert.doesNotMatch(JSON.stringify(warnings), /s3cret/);
  });

  it('stops an event that gets 410 Gone, and only that event', async () => {
    const handler = handlerFor();
    const gone = await emit();
    const other = await emit();
    receiver.reply({ status: 410 });
    assert.equal(await attempt(handler, gone), 'done');
    assert.equal(await attempt(handler, other), 'done');
    const row = await delivery(gone);
    assert.equal(row.status, 'failed');
    assert.equal(row.last_status_code, 410);
    assert.match(row.last_error!, /410 Gone/);
    assert.equal((await delivery(other)).status, 'delivered');
  });

  it('does not follow a redirect: a 3xx is a failed attempt, retried on the schedule', async () => {
    const id = await emit();
    receiver.reply({ status: 307, headers: { location: `http://127.0.0.1:${receiver.port}/elsewhere` } });
    assert.equal(await attempt(handlerFor(), id), 'retry');
    assert.equal(receiver.received.length, 1);
    const row = await delivery(id);
    assert.equal(row.last_status_code, 307);
    assert.match(row.last_error!, /redirects are not followed/);
  });

  it('times out a receiver that never answers and retries it', { timeout: 10_000 }, async () => {
    const handler = handlerFor({ timeoutMs: 1_000 });
    const id = await emit();
    receiver.reply('hang');
    const started = performance.now();
    assert.equal(await attempt(handler, id), 'retry');
    const waited = performance.now() - started;
    assert.ok(waited >= 950 && waited < 3_000, `waited ${waited} ms`);
    const row = await delivery(id);
    assert.equal(row.status, 'pending');
    assert.equal(row.last_status_code, null);
    assert.equal(row.last_error, 'timed out: no complete answer within 1 s');
    assert.equal(row.next_attempt_at, t.clock.now() + 5_000);

    t.clock.advance(5_000);
    assert.equal(await attempt(handler, id), 'done');
    assert.equal((await delivery(id)).status, 'delivered');
  });

  it('fails, and retries, a receiver that answers 101 Switching Protocols, and one that sends a gigabyte', {
    timeout: 20_000,
  }, async () => {
    const answers = [
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: Upgrade\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n',
    ];
    const raw = createServer((socket) => {
      socket.on('error', () => {});
      socket.once('data', () => {
        const answer = answers.shift()!;
        socket.write(answer);
        // The gigabyte, for as long as the socket takes it.
        if (answer.includes('200')) {
          const chunk = Buffer.alloc(1 << 16, 0x61);
          const more = () => {
            while (!socket.destroyed && socket.write(chunk));
          };
          socket.on('drain', more);
          more();
        }
      });
    });
    raw.listen(0, '127.0.0.1');
    await once(raw, 'listening');
    try {
      const handler = handlerFor({ timeoutMs: 5_000 });
      const url = `http://127.0.0.1:${(raw.address() as AddressInfo).port}/hooks`;
      const upgraded = await emit(url);
      assert.equal(await attempt(handler, upgraded), 'retry');
      assert.equal((await delivery(upgraded)).last_error, 'the receiver answered 101');
      const large = await emit(url);
      const started = performance.now();
      assert.equal(await attempt(handler, large), 'done');
      assert.ok(performance.now() - started < 2_000, 'judged by its status, without reading the gigabyte');
    } finally {
      raw.close();
    }
  });

  const refusedUrls = (port: number) => [
    `http://127.0.0.1:${port}/hooks`,
    `http://localhost:${port}/hooks`,
    'http://10.0.0.1/hooks',
    'http://169.254.169.254/latest/meta-data/',
    `http://[::1]:${port}/hooks`,
    'https://internal.example.com/hooks',
  ];
  it(
    'refuses URLs that resolve to loopback, private, link-local ' + 'or metadata addresses, once, without posting',
    async () => {
      const handler = handlerFor({
        allowPrivate: false,
        // internal.example.com stands for a public name whose DNS points inside the network.
        resolve: async (host) =>
          host === 'internal.example.com' ? [{ address: '10.0.0.1', family: 4 }] : systemResolver(host),
      });
      for (const url of refusedUrls(receiver.port)) {
        const id = await emit(url);
        assert.equal(await attempt(handler, id), 'done', url);
        const row = await delivery(id);
        assert.equal(row.status, 'failed', url);
        assert.equal(row.attempts, 1, url);
        assert.equal(row.next_attempt_at, null, url);
        assert.match(row.last_error!, /^refused: .* is a (loopback|private|link-local) address/, url);
      }
      assert.equal(receiver.received.length, 0);
    },
  );

  it('never posts to a cloud metadata service, private addresses allowed, however its address is written', async () => {
    // A name a DNS answer points at the metadata service, and GCP's name pointed at the receiver:
    // either would be posted to were the address judged only by WEBHOOK_ALLOW_PRIVATE.
    const names: Record<string, string> = {
      'imds.example.com': '169.254.169.254',
      'metadata.google.internal': '127.0.0.1',
    };
    const resolve = async (host: string) => [{ address: names[host], family: 4 }];
    const handler = handlerFor({ allowPrivate: true, timeoutMs: 1_000, resolve });
    const urls = [
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:169.254.169.254]/latest/meta-data/',
      'http://[fd00:ec2::254]/latest/meta-data/',
      'http://100.100.100.200/latest/meta-data/',
      'http://imds.example.com/latest/meta-data/',
      `http://metadata.google.internal:${receiver.port}/computeMetadata/v1/`,
    ];
    for (const url of urls) {
      const id = await emit(url);
      assert.equal(await attempt(handler, id), 'done', url);
      const row = await delivery(id);
      assert.deepEqual([row.status, row.attempts, row.next_attempt_at], ['failed', 1, null], url);
      assert.match(row.last_error!, /^refused: .*; webhooks are never posted there, whatever WEBHOOK_ALLOW/, url);
    }
    assert.equal(receiver.received.length, 0);
  });

  it('connects to the address it checked, not to a second DNS answer', async () => {
    // No DNS knows hooks.herald.test; the post can only arrive if the vetted address is used.
    const handler = handlerFor({ resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
    const id = await emit(`http://hooks.herald.test:${receiver.port}/hooks`);
    assert.equal(await attempt(handler, id), 'done');
    assert.equal(receiver.received[0].headers.host, `hooks.herald.test:${receiver.port}`);
  });

  it('posts at most four at a time to one host; a fifth waits its bound, then goes back to the queue without using ' +
    'an attempt', {
    timeout: 10_000,
  }, async () => {
    const handler = handlerFor({ timeoutMs: 1_000, hostWaitMs: 200 });
    const ids = await Promise.all([1, 2, 3, 4, 5].map(() => emit()));
    receiver.reply('hang', 'hang', 'hang', 'hang');
    const hanging = ids.slice(0, 4).map((id) => attempt(handler, id));
    await receiver.posts(4);
    assert.equal(await attempt(handler, ids[4]), 'retry');
    const waiting = await delivery(ids[4]);
    assert.equal(waiting.attempts, 0);
    assert.equal(waiting.last_error, null);
    assert.deepEqual(await Promise.all(hanging), ['retry', 'retry', 'retry', 'retry']);
    assert.equal(await attempt(handler, ids[4]), 'done');
    assert.equal(receiver.received.length, 5);
  });

  it('signs a post that waited for its host with the secret rotated meanwhile too', { timeout: 10_000 }, async () => {
    const before = (await ensureSecret(t.ctx.db, t.ctx.encryptionKey, t.clock, account.row.id)).secret;
    const handler = handlerFor({ timeoutMs: 8_000, hostWaitMs: 8_000 });
    const ids = await Promise.all([1, 2, 3, 4, 5].map(() => emit()));
    receiver.reply('hang', 'hang', 'hang', 'hang');
    const hanging = ids.slice(0, 4).map((id) => attempt(handler, id));
    await receiver.posts(4);
    const waiting = attempt(handler, ids[4]);
    const rotated = await t.app.inject({
      method: 'POST',
      url: '/webhooks/secret/rotate',
      headers: { authorization: `Bearer ${await t.tokenFor(account)}` },
    });
    assert.equal(rotated.statusCode, 200, rotated.body);
    // The four posts end only now, the rotation committed: a timeout could free the fifth's slot before it.
    receiver.answerHung();
    assert.deepEqual(await Promise.all(hanging), ['done', 'done', 'done', 'done']);
    assert.equal(await waiting, 'done');
    const post = receiver.received.at(-1)!;
    const headers = post.headers as Record<string, string>;
    for (const secret of [rotated.json().secret, before]) new Webhook(secret).verify(post.body, headers);
  });

  it('holds eight of twelve claimed posts to one slow host, four posting, and turns four away without an attempt', {
    timeout: 20_000,
  }, async () => {
    const ids = await Promise.all(Array.from({ length: 12 }, () => emit()));
    receiver.reply(...ids.map(() => ({ status: 200, delayMs: 100 })));
    const handler = handlerFor();
    const worker = new Worker({ database: t.ctx.database, clock: t.clock });
    worker.register(DELIVER_KIND, handler, { concurrency: 32 });
    assert.equal(await worker.drain(), 12);
    assert.equal(receiver.received.length, 8, 'four posted, four waited their turn in their worker slots');
    const turnedAway = await t.ctx.db.selectFrom('jobs').select('run_at').where('kind', '=', DELIVER_KIND).execute();
    assert.equal(turnedAway.length, 4);
    // Spread at the pace four posts of 100 ms clear them, not all due at once.
    const due = turnedAway.map((job) => Number(job.run_at) - t.clock.now()).sort((a, b) => a - b);
    assert.ok(due[0] > 0 && due[3] - due[0] >= 50, `due in ${due} ms`);
    t.clock.advance(due[3]);
    assert.equal(await worker.drain(), 4);
    assert.equal(receiver.received.length, 12);
    assert.equal(receiver.mostAtOnce, 4);
    for (const id of ids)
      assert.deepEqual([(await delivery(id)).status, (await delivery(id)).attempts], ['delivered', 1]);
    const left = await t.ctx.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(left.n), 0);
  });

  for (const hostNames of ['one host name', 'forty host names']) {
    it(`posts another account’s event at once while one account’s receiver hangs under ${hostNames}`, {
      timeout: 20_000,
    }, async () => {
      const hanging = await startReceiver();
      const other = await t.createAccount();
      const handler = handlerFor({ timeoutMs: 6_000, resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
      const urls = Array.from({ length: 40 }, (_, i) =>
        hostNames === 'one host name' ? hanging.url : `http://h${i}.hang.test:${hanging.port}/hooks`,
      );
      hanging.reply(...urls.map(() => 'hang' as const));
      for (const url of urls) await emit(url);
      const otherId = await t.ctx.db.transaction().execute((trx) =>
        emitWebhook(trx, t.clock, {
          accountId: other.row.id,
          url: `http://other.test:${receiver.port}/hooks`,
          type: 'sms.status',
          data: {},
        }),
      );
      const worker = new Worker({ database: t.ctx.database, clock: t.clock });
      worker.register(DELIVER_KIND, handler, { concurrency: 32 });
      await worker.start();
      try {
        const startedAt = Date.now();
        await waitFor('the other account’s delivery', async () =>
          (await delivery(otherId)).status === 'delivered' ? true : undefined,
        );
        // Before the hanging posts time out: the other account never waited for one of them.
        const ended = await t.ctx.db
          .selectFrom('webhook_deliveries')
          .select('id')
          .where('account_id', '=', account.row.id)
          .where('attempts', '>', 0)
          .execute();
        assert.deepEqual(ended, [], 'no hanging post had ended');
        assert.ok(Date.now() - startedAt < 6_000, `delivered after ${Date.now() - startedAt} ms`);
        // The rest go back to the queue, each to come back at its turn; the last of them may still be claimed.
        const turnedAway = await waitFor('thirty-two deliveries turned away', async () => {
          const jobs = await t.ctx.db
            .selectFrom('jobs')
            .select(['state', 'run_at'])
            .where('kind', '=', DELIVER_KIND)
            .where('state', '!=', 'running')
            .execute();
          return jobs.length >= 32 ? jobs : undefined;
        });
        assert.equal(turnedAway.length, 32);
        // The claimed posts at the receiver, however far the load let them get.
        await hanging.posts(hostNames === 'one host name' ? 4 : 8);
        assert.equal(hanging.mostAtOnce, hostNames === 'one host name' ? 4 : 8);
        for (const job of turnedAway) assert.ok(job.state === 'ready' && Number(job.run_at) > t.clock.now());
      } finally {
        await worker.stop();
        await hanging.close();
      }
    });
  }

  it('abandons a hanging post when its worker stops, recording no attempt', { timeout: 10_000 }, async () => {
    const id = await emit();
    receiver.reply('hang');
    const stop = new AbortController();
    const { generation } = await delivery(id);
    const job = { payload: { deliveryId: id, generation } } as unknown as Job;
    const running = handlerFor().handle(job, { signal: stop.signal, lease: { id: 0, token: 'test' } });
    await receiver.posts(1);
    stop.abort();
    await assert.rejects(running, SnoozeJob);
    const row = await delivery(id);
    assert.equal(row.status, 'pending');
    assert.equal(row.attempts, 0);
    assert.equal(row.last_error, null);
  });

  it('signs with both secrets during a rotation, each signature verifying alone, and with one after it', async () => {
    const handler = handlerFor();
    const before = await ensureSecret(t.ctx.db, t.ctx.encryptionKey, t.clock, account.row.id);
    const next = newSecret(t.ctx.encryptionKey, account.row.id);
    const after = await rotateSecret(t.ctx.db, account.row.id, next, t.clock.now());
    assert.notEqual(after.secret, before.secret);

    const id = await emit();
    assert.equal(await attempt(handler, id), 'done');
    const post = receiver.received[0];
    const signatures = (post.headers['webhook-signature'] as string).split(' ');
    assert.equal(signatures.length, 2);
    for (const [secret, signature] of [
      [after.secret, signatures[0]],
      [before.secret, signatures[1]],
    ]) {
      const headers = { ...(post.headers as Record<string, string>), 'webhook-signature': signature };
      assert.ok(new Webhook(secret).verify(post.body, headers));
      assert.throws(() =>
        new Webhook(secret === after.secret ? before.secret : after.secret).verify(post.body, headers),
      );
    }

    // Past the overlap only the new secret signs.
    t.clock.advance(PREVIOUS_SECRET_TTL_MS);
    const late = await emit();
    assert.equal(await attempt(handler, late), 'done');
    assert.equal((receiver.received[1].headers['webhook-signature'] as string).split(' ').length, 1);
  });
});
