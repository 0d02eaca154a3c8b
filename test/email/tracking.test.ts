import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { afterEach, beforeEach, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../src/clock.ts';
import { trackingKey } from '../../src/email/tracking.ts';
import { Keyring } from '../../src/sealed.ts';
import { type TrackingClaim, trackingToken } from '../../src/email/tracking-tokens.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { base64, buildBatch, sandboxEmails, sendBatch, subscribedAgain } from './support.ts';

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

// The tracking URLs, followed as a mail client or a person would: no token, no cookie.
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let receiver: Receiver;
  beforeEach(async () => {
    // PUBLIC_URL unset: its default follows PORT.
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()), env: { PORT: '3000' } });
    alice = await api.client();
    receiver = await startReceiver();
    sendOf.clear();
  });
  afterEach(async () => {
    await receiver.close();
    await api.close();
  });

  /** A delivered batch to ada with one link; ada's recipient id, and the message as the sandbox took it. */
  async function delivered() {
    await alice.upsert([{ email: 'ada@example.com', emailOptIn: true }]);
    const emailBody = base64(
      '<p>Dear [firstName], see <a href="https://shop.example/spring?x=1">the spring sale</a>.</p>',
    );
    const batchId = await sendBatch(api, alice, buildBatch({ webHookUrl: receiver.url, emailBody }));
    const recipientId = await recipientOf(batchId);
    const [message] = await sandboxEmails(alice);
    return { batchId, recipientId, message: await simpleParser(message.raw) };
  }
  /** The send of each recipient the tests made, which its tokens sign. */
  const sendOf = new Map<number, string>();
  /** The id of a one-recipient batch's recipient. */
  async function recipientOf(batchId: string): Promise<number> {
    const { id } = await api.t.ctx.db
      .selectFrom('send_recipients')
      .select('id')
      .where('send_id', '=', batchId)
      .executeTakeFirstOrThrow();
    sendOf.set(Number(id), batchId);
    return Number(id);
  }
  /** A token as Herald makes it, for a recipient the tests made (another id: signed with the first's send). */
  const token = (claim: Omit<TrackingClaim, 'sendId'>) =>
    trackingToken(trackingKey(api.t.ctx.encryptionKey).current, {
      sendId: sendOf.get(claim.recipientId) ?? [...sendOf.values()][0],
      ...claim,
    });
  const open = (method: 'GET' | 'POST', url: string, headers: Record<string, string> = {}, payload?: string) =>
    api.t.app.inject({ method, url, headers, payload });

  it(
    'carries each tracking URL in the message it rendered: the link, the pixel, the unsubscribe link and ' +
      'List-Unsubscribe',
    async () => {
      const { recipientId, message } = await delivered();
      const url = (claim: Omit<TrackingClaim, 'sendId'>) =>
        `${api.t.ctx.config.publicUrl}/t/${claim.kind[0]}/${token(claim)}`;
      const html = message.html as string;
      assert.ok(html.includes(`href="${url({ recipientId, kind: 'click', link: 0 })}"`), html);
      assert.ok(html.includes('href="http://localhost:3000/t/c/'), 'PUBLIC_URL defaults to localhost at PORT');
      assert.ok(!html.includes('https://shop.example/spring'), 'the link’s own URL is not in the message');
      assert.ok(html.includes(`src="${url({ recipientId, kind: 'open' })}"`), 'the pixel');
      assert.ok(html.includes(url({ recipientId, kind: 'unsubscribe' })), 'the unsubscribe link');
      assert.ok(
        message.text!.includes(url({ recipientId, kind: 'click', link: 0 })),
        'the text part’s link is tracked too',
      );
      assert.ok(
        message.headerLines.some((h) => h.line === 'List-Unsubscribe-Post: List-Unsubscribe=One-Click'),
        'RFC 8058',
      );
      const unfolded = message.headerLines.map((h) => h.line.replace(/\r\n\s+/g, ' '));
      assert.ok(
        unfolded.includes(`List-Unsubscribe: <${url({ recipientId, kind: 'unsubscribe' })}>`),
        unfolded.join('\n'),
      );
    },
  );

  it('records a click (302 to its URL) and an open (a GIF), a machine’s flagged, and posts them', async () => {
    const { batchId, recipientId } = await delivered();
    api.clock.advance(5000);
    const click = await open('GET', `/t/c/${token({ recipientId, kind: 'click', link: 0 })}`, {
      'user-agent': 'Mozilla/5.0 (Macintosh)',
    });
    assert.equal(click.statusCode, 302);
    assert.equal(click.headers.location, 'https://shop.example/spring?x=1');
    assert.equal(click.headers['set-cookie'], undefined);
    const pixel = await open('GET', `/t/o/${token({ recipientId, kind: 'open' })}`, {
      'user-agent': 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)',
    });
    assert.equal(pixel.statusCode, 200);
    assert.equal(pixel.headers['content-type'], 'image/gif');
    assert.equal(pixel.rawPayload.subarray(0, 6).toString(), 'GIF89a');

    const [recipient] = (await alice.get(`/email/batch/${batchId}`)).json().recipients;
    assert.deepEqual(
      recipient.history
        .slice(2)
        .map((h: { event: string; url?: string; machine?: boolean }) => [h.event, h.url, h.machine]),
      [
        ['Click', 'https://shop.example/spring?x=1', false],
        ['Open', undefined, true],
      ],
    );
    api.clock.advance(1000);
    await api.drain();
    const secret = (await alice.get('/webhooks/secret')).json().secret as string;
    const events = receiver.received.flatMap(
      (post) =>
        (
          new Webhook(secret).verify(post.body, post.headers as Record<string, string>) as {
            data: Array<{ event: string; url: string | null; machine: boolean | null }>;
          }
        ).data,
    );
    assert.deepEqual(
      events.filter((e) => e.event === 'Click' || e.event === 'Open').map((e) => [e.event, e.url, e.machine]),
      [
        ['Click', 'https://shop.example/spring?x=1', false],
        ['Open', null, true],
      ],
    );
  });

  it('records an open or a click of one link once a minute however often it is fetched', async () => {
    const { batchId, recipientId } = await delivered();
    api.clock.advance(5000);
    const pixel = `/t/o/${token({ recipientId, kind: 'open' })}`;
    const link = `/t/c/${token({ recipientId, kind: 'click', link: 0 })}`;
    for (let i = 0; i < 5; i++) {
      assert.equal((await open('GET', pixel)).statusCode, 200);
      assert.equal((await open('GET', link)).statusCode, 302, 'every click still leads on');
      api.clock.advance(10_000);
    }
    api.clock.advance(10_000);
    await open('GET', pixel);
    const [recipient] = (await alice.get(`/email/batch/${batchId}`)).json().recipients;
    assert.deepEqual(
      recipient.history.slice(2).map((h: { event: string }) => h.event),
      ['Open', 'Click', 'Open'],
    );
  });

  it('records a person’s open though a machine opened the message a moment before', async () => {
    const { batchId, recipientId } = await delivered();
    api.clock.advance(5000);
    const pixel = `/t/o/${token({ recipientId, kind: 'open' })}`;
    await open('GET', pixel, { 'user-agent': 'Mozilla/5.0 (via ggpht.com GoogleImageProxy)' });
    await open('GET', pixel, { 'user-agent': 'Mozilla/5.0 (Macintosh)' });
    const [recipient] = (await alice.get(`/email/batch/${batchId}`)).json().recipients;
    assert.deepEqual(
      recipient.history.slice(2).map((h: { event: string; machine?: boolean }) => [h.event, h.machine]),
      [
        ['Open', true],
        ['Open', false],
      ],
    );
  });

  it('redirects a click to a link a header cannot carry as written, percent-encoded as a browser would', async () => {
    await alice.upsert([{ email: 'ada@example.com', emailOptIn: true }]);
    const emailBody = base64('<p><a href="https://shop.example/café/–?q=a b">Spring</a></p>');
    const batchId = await sendBatch(api, alice, buildBatch({ emailBody }));
    const click = await open(
      'GET',
      `/t/c/${token({ recipientId: await recipientOf(batchId), kind: 'click', link: 0 })}`,
    );
    assert.equal(click.statusCode, 302, click.body);
    assert.equal(click.headers.location, 'https://shop.example/caf%C3%A9/%E2%80%93?q=a%20b');
  });

  it('flags an open within 2 seconds of delivery as a machine’s', async () => {
    const { batchId, recipientId } = await delivered();
    api.clock.advance(1500);
    await open('GET', `/t/o/${token({ recipientId, kind: 'open' })}`, { 'user-agent': 'Mozilla/5.0 (iPhone)' });
    const [recipient] = (await alice.get(`/email/batch/${batchId}`)).json().recipients;
    assert.deepEqual(recipient.history.at(-1), {
      event: 'Open',
      at: new Date(api.clock.now()).toISOString(),
      machine: true,
    });
  });

  it(
    'unsubscribes by the one-click POST (RFC 8058) and by the link: emailOptIn false, the address suppressed, ' +
      'later batches Drop it',
    async () => {
      const { batchId, recipientId } = await delivered();
      const oneClick = await open(
        'POST',
        `/t/u/${token({ recipientId, kind: 'unsubscribe' })}`,
        { 'content-type': 'application/x-www-form-urlencoded' },
        'List-Unsubscribe=One-Click',
      );
      assert.equal(oneClick.statusCode, 200, oneClick.body);
      assert.equal(oneClick.headers.location, undefined);
      const [recipient] = (await alice.get(`/email/batch/${batchId}`)).json().recipients;
      assert.equal(recipient.history.at(-1).event, 'Unsubscribe');
      const [contact] = (await alice.get('/contacts?email=ada@example.com')).json().contacts;
      assert.equal(contact.emailOptIn, false);
      assert.equal(
        (await alice.get('/email/suppressions?email=ada@example.com')).json().suppressions[0].reason,
        'unsubscribed',
      );
      api.clock.advance(5000);
      const link = await open('GET', `/t/u/${token({ recipientId, kind: 'unsubscribe' })}`, {
        'user-agent': 'Mozilla/5.0 (iPhone)',
      });
      assert.equal(link.statusCode, 200);
      assert.match(link.body, /You are unsubscribed/);
      const [again] = (await alice.get(`/email/batch/${batchId}`)).json().recipients;
      assert.deepEqual(
        again.history.filter((h: { event: string }) => h.event === 'Unsubscribe').length,
        1,
        'unsubscribed once: the second is neither counted nor posted',
      );

      const next = await sendBatch(api, alice, buildBatch());
      assert.equal((await alice.get(`/email/batch/${next}`)).json().recipients[0].status, 'Dropped');
      assert.equal((await sandboxEmails(alice)).length, 1);

      // Subscribed again; then the person presses the same message's unsubscribe once more.
      await subscribedAgain(api, alice, 'ada@example.com');
      api.clock.advance(5000);
      const third = await open('GET', `/t/u/${token({ recipientId, kind: 'unsubscribe' })}`, {
        'user-agent': 'Mozilla/5.0 (iPhone)',
      });
      assert.equal(third.statusCode, 200);
      assert.equal((await alice.get('/email/suppressions?email=ada@example.com')).json().suppressions.length, 1);
      assert.equal((await alice.get('/contacts?email=ada@example.com')).json().contacts[0].emailOptIn, false);
    },
  );

  it(
    'does not unsubscribe on a link scanner’s GET, a HEAD or a GET within 2 s of delivery: it answers a button ' +
      'that posts the one-click form',
    async () => {
      const { batchId, recipientId } = await delivered();
      const path = `/t/u/${token({ recipientId, kind: 'unsubscribe' })}`;
      const early = await open('GET', path, { 'user-agent': 'Mozilla/5.0 (iPhone)' });
      api.clock.advance(5000);
      const scanned = await open('GET', path, {
        'user-agent': 'Mozilla/5.0 (compatible; Microsoft Office Protection; SafeLinks)',
      });
      const headed = await api.t.app.inject({
        method: 'HEAD',
        url: path,
        headers: { 'user-agent': 'Mozilla/5.0 (iPhone)' },
      });
      for (const page of [early, scanned]) {
        assert.equal(page.statusCode, 200);
        assert.match(page.body, /<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click">/);
      }
      assert.equal(headed.statusCode, 200);
      const [recipient] = (await alice.get(`/email/batch/${batchId}`)).json().recipients;
      assert.deepEqual(
        recipient.history.map((h: { event: string }) => h.event),
        ['Processed', 'Delivered'],
        'nothing recorded',
      );
      assert.equal((await alice.get('/email/suppressions?email=ada@example.com')).json().suppressions.length, 0);
      assert.equal((await alice.get('/contacts?email=ada@example.com')).json().contacts[0].emailOptIn, true);

      const pressed = await open(
        'POST',
        path,
        { 'content-type': 'application/x-www-form-urlencoded' },
        'List-Unsubscribe=One-Click',
      );
      assert.equal(pressed.statusCode, 200);
      assert.equal((await alice.get('/contacts?email=ada@example.com')).json().contacts[0].emailOptIn, false);
    },
  );

  it(
    'refuses forged, altered and unknown tokens with 404 and ' + 'records nothing; the pixel still answers its GIF',
    async () => {
      const { batchId, recipientId } = await delivered();
      const good = token({ recipientId, kind: 'click', link: 0 });
      const altered = good.slice(0, -2) + (good.endsWith('AA') ? 'AB' : 'AA');
      const otherKey = trackingToken(trackingKey(new Keyring(api.t.ctx.jwtKey)).current, {
        recipientId,
        sendId: batchId,
        kind: 'click',
        link: 0,
      });
      for (const bad of [
        altered,
        otherKey,
        'AAAA',
        token({ recipientId: recipientId + 1000, kind: 'click', link: 0 }),
        token({ recipientId, kind: 'click', link: 7 }),
        token({ recipientId, kind: 'open' }),
      ]) {
        assert.equal((await open('GET', `/t/c/${bad}`)).statusCode, 404, bad);
        assert.equal(
          (
            await open(
              'POST',
              `/t/u/${bad}`,
              { 'content-type': 'application/x-www-form-urlencoded' },
              'List-Unsubscribe=One-Click',
            )
          ).statusCode,
          404,
          bad,
        );
      }
      assert.equal((await open('GET', `/t/o/${altered}`)).headers['content-type'], 'image/gif');
      const [recipient] = (await alice.get(`/email/batch/${batchId}`)).json().recipients;
      assert.deepEqual(
        recipient.history.map((h: { event: string }) => h.event),
        ['Processed', 'Delivered'],
      );
    },
  );

  it('takes the one-click POST as multipart/form-data too, as RFC 8058 asks mail clients to send it', async () => {
    const { recipientId } = await delivered();
    const boundary = 'herald-boundary';
    const field = 'Content-Disposition: form-data; name="List-Unsubscribe"\r\n\r\nOne-Click';
    const form = `--${boundary}\r\n${field}\r\n--${boundary}--\r\n`;
    const oneClick = await open(
      'POST',
      `/t/u/${token({ recipientId, kind: 'unsubscribe' })}`,
      { 'content-type': `multipart/form-data; boundary=${boundary}` },
      form,
    );
    assert.equal(oneClick.statusCode, 200, oneClick.body);
    const [suppressed] = (await alice.get('/email/suppressions?email=ada@example.com')).json().suppressions;
    assert.equal(suppressed?.reason, 'unsubscribed');
  });

  it('takes a token only as written: a character more, padding, a spare bit is 404, recording nothing', async () => {
    const { batchId, recipientId } = await delivered();
    api.clock.advance(5000);
    const click = token({ recipientId, kind: 'click', link: 0 });
    const pixel = token({ recipientId, kind: 'open' });
    const unsubscribe = token({ recipientId, kind: 'unsubscribe' });
    // An open or unsubscribe token is 25 bytes: its last character carries 4 bits that decode to nothing.
    const spareBit = (t: string) => t.slice(0, -1) + BASE64URL[BASE64URL.indexOf(t.at(-1)!) ^ 1];
    for (const bad of [`${click}A`, `${click}=`, `${click}AAA`]) {
      assert.equal((await open('GET', `/t/c/${bad}`)).statusCode, 404, bad);
    }
    for (const bad of [`${pixel}A`, spareBit(pixel)]) {
      const answer = await open('GET', `/t/o/${bad}`, { 'user-agent': 'Mozilla/5.0 (Macintosh)' });
      assert.equal(answer.headers['content-type'], 'image/gif', bad);
    }
    for (const bad of [`${unsubscribe}A`, spareBit(unsubscribe)]) {
      const person = { 'user-agent': 'Mozilla/5.0 (Macintosh)' };
      assert.equal((await open('GET', `/t/u/${bad}`, person)).statusCode, 404, bad);
      const form = { 'content-type': 'application/x-www-form-urlencoded' };
      assert.equal((await open('POST', `/t/u/${bad}`, form, 'List-Unsubscribe=One-Click')).statusCode, 404, bad);
    }
    assert.equal((await open('GET', `/t/c/${click}`)).statusCode, 302, 'the token as written still works');
    const [recipient] = (await alice.get(`/email/batch/${batchId}`)).json().recipients;
    assert.deepEqual(
      recipient.history.map((h: { event: string }) => h.event),
      ['Processed', 'Delivered', 'Click'],
    );
  });

  it(
    'takes a token for its own recipient only: once the row’s id names a recipient of another send (SQLite gives ' +
      'a deleted highest rowid again), it is 404 and records nothing on the new one',
    async () => {
      const { batchId: first, recipientId } = await delivered();
      const old = {
        click: token({ recipientId, kind: 'click', link: 0 }),
        unsubscribe: token({ recipientId, kind: 'unsubscribe' }),
      };
      // Retention, or the account's deletion, takes the first send and its recipients.
      await api.t.ctx.db.deleteFrom('send_recipients').where('send_id', '=', first).execute();
      await api.t.ctx.db.deleteFrom('sends').where('id', '=', first).execute();
      const bob = await api.client();
      await bob.upsert([{ email: 'bea@example.com', emailOptIn: true }]);
      const second = await sendBatch(api, bob, buildBatch({}, { recipients: [{ to: 'bea@example.com' }] }));
      let reused = await recipientOf(second);
      // PostgreSQL's identity never gives an id again: the row is given the first one's, as SQLite does.
      if (reused !== recipientId) {
        await api.t.ctx.db.updateTable('send_recipients').set({ id: recipientId }).where('id', '=', reused).execute();
        reused = await recipientOf(second);
      }
      assert.equal(reused, recipientId);
      api.clock.advance(5000);
      const person = { 'user-agent': 'Mozilla/5.0 (Macintosh)' };
      assert.equal((await open('GET', `/t/c/${old.click}`, person)).statusCode, 404);
      const form = { 'content-type': 'application/x-www-form-urlencoded' };
      assert.equal((await open('POST', `/t/u/${old.unsubscribe}`, form, 'List-Unsubscribe=One-Click')).statusCode, 404);
      const [recipient] = (await bob.get(`/email/batch/${second}`)).json().recipients;
      assert.deepEqual(
        recipient.history.map((h: { event: string }) => h.event),
        ['Processed', 'Delivered'],
      );
      assert.equal((await bob.get('/email/suppressions?email=bea@example.com')).json().suppressions.length, 0);
      assert.equal((await open('GET', `/t/o/${token({ recipientId, kind: 'open' })}`, person)).statusCode, 200);
      const [opened] = (await bob.get(`/email/batch/${second}`)).json().recipients;
      assert.equal(opened.history.at(-1).event, 'Open', 'the new recipient’s own token works');
    },
  );

  it(
    'takes a token made before tokens signed their send: on SQLite for a row written before then only (SQLite ' +
      'gives a row id again); on PostgreSQL, which never does, for any',
    async () => {
      const { batchId, recipientId } = await delivered();
      // The earlier form: the kind's index alone in the first byte, the tag over it and the id.
      const head = Buffer.alloc(9);
      head.writeUInt8(1, 0);
      head.writeBigUInt64BE(BigInt(recipientId), 1);
      const tag = createHmac('sha256', trackingKey(api.t.ctx.encryptionKey).current)
        .update(head)
        .digest()
        .subarray(0, 16);
      const pixel = `/t/o/${Buffer.concat([head, tag]).toString('base64url')}`;
      const opens = async () =>
        (await alice.get(`/email/batch/${batchId}`))
          .json()
          .recipients[0].history.filter((h: { event: string }) => h.event === 'Open').length;
      const person = { 'user-agent': 'Mozilla/5.0 (Macintosh)' };
      api.clock.advance(5000);
      await open('GET', pixel, person);
      assert.equal(await opens(), dialect === 'sqlite' ? 0 : 1, 'a row written by this version');
      if (dialect === 'sqlite') {
        // As a row written by the version before reads.
        await api.t.ctx.db
          .updateTable('send_recipients')
          .set({ bound_tokens: 0 })
          .where('id', '=', recipientId)
          .execute();
        await open('GET', pixel, person);
        assert.equal(await opens(), 1, 'a message sent before the upgrade still tracks');
      }
    },
  );
});
