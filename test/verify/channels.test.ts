import assert from 'node:assert/strict';
import { afterEach, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/clock.ts';
import { startSmsc, type Smsc } from '../../src/sim/smsc.ts';
import { startSmtpSink, type SmtpSink } from '../../src/sim/smtp.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';
import { foundInStorage } from '../support/storage.ts';
import { waitFor } from '../support/wait.ts';

// Verify over real transports: the SMPP simulator and the SMTP sink; and codes by email (src/verify/).

const NUMBER = '919812345678';
const ADDRESS = 'ada@example.com';

forEachDatabase((dialect) => {
  let api: ApiTest | undefined;
  let smsc: Smsc | undefined;
  let sink: SmtpSink | undefined;
  afterEach(async () => {
    // The worker holds the transports: stopped, it closes their binds and connections.
    await api?.worker.stop();
    await api?.close();
    await smsc?.close();
    await sink?.close();
    api = smsc = sink = undefined;
  });
  const start = async (env: Record<string, string> = {}): Promise<ApiClient> => {
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()), env });
    return api.client();
  };
  const check = (client: ApiClient, id: string, code: string) => client.post(`/verify/${id}/check`, { code });

  it('sends a code over SMPP to the simulator, and approves it', async () => {
    smsc = await startSmsc({ systemId: 'herald', password: 'secret' });
    const alice = await start({ SMS_TRANSPORT: `smpp://herald:secret@127.0.0.1:${smsc.port}` });
    const started = await alice.post('/verify', { to: NUMBER, template: 'Your Herald code: [code]' });
    assert.equal(started.statusCode, 201, started.body);
    const id = started.json().verificationId;
    const [taken] = await waitFor('the simulator to take the code', async () => {
      await api!.drain();
      const received = smsc!.received(NUMBER);
      return received.length > 0 ? received : undefined;
    });
    const text = taken.text!;
    const code = /code: (\d{6})$/.exec(text)?.[1];
    assert.ok(code, text);
    assert.equal((await check(alice, id, code)).json().status, 'approved');
  });

  it('sends a code by email over SMTP to the sink, untracked, and approves it', async () => {
    sink = await startSmtpSink({ httpPort: null });
    const alice = await start({ EMAIL_TRANSPORT: `smtp://127.0.0.1:${sink.port}` });
    const started = await alice.post('/verify', { to: 'Ada@Example.com', channel: 'email' });
    assert.equal(started.statusCode, 201, started.body);
    assert.deepEqual([started.json().to, started.json().channel], [ADDRESS, 'email']);
    const [taken] = await waitFor('the sink to take the code', async () => {
      await api!.drain();
      const received = sink!.received({ to: ADDRESS });
      return received.length > 0 ? received : undefined;
    });
    const mail = await simpleParser(taken.raw);
    assert.equal(mail.subject, 'Your verification code');
    assert.equal(mail.from?.value[0].address, 'no-reply@mail.localhost');
    const code = /is (\d{6})/.exec(mail.text ?? '')?.[1];
    assert.ok(code, mail.text);
    assert.doesNotMatch(String(mail.html), /\/t\/o\/|\/t\/c\//, 'no open pixel, no tracked link');
    // A login code is not marketing: an unsubscribe from it would refuse the address its next code.
    assert.equal(mail.headers.get('list-unsubscribe'), undefined);
    assert.equal(mail.headers.get('list-unsubscribe-post'), undefined);
    assert.doesNotMatch(`${mail.html}${mail.text}`, /\/t\/u\/|unsubscribe/i);
    assert.equal((await check(alice, started.json().verificationId, code)).json().status, 'approved');
  });

  it('sends codes by email in a lane of their own, honours a suppression, and keeps the code sealed', async () => {
    const alice = await start();
    const started = await alice.post('/verify', {
      to: ADDRESS,
      channel: 'email',
      subject: 'Sign in to Herald',
      template: 'Wombat code [code]',
    });
    assert.equal(started.statusCode, 201, started.body);
    const jobs = await api!.t.ctx.db.selectFrom('jobs').select(['kind', 'priority']).execute();
    assert.deepEqual(
      jobs.filter((job) => job.kind.startsWith('email.')).map((job) => job.kind),
      ['email.single'],
      'the passcode lane, not a batch',
    );
    await api!.drain();
    const [kept] = (await alice.get(`/sandbox/email?to=${ADDRESS}`)).json().messages as Array<{ raw: string }>;
    const mail = await simpleParser(kept.raw);
    assert.equal(mail.subject, 'Sign in to Herald');
    const code = /Wombat code (\d{6})/.exec(mail.text ?? '')?.[1];
    assert.ok(code, mail.text);
    // The template's words are kept as a batch's HTML is; the code only sealed, in its recipient's tags.
    const found = await foundInStorage(api!, dialect, [code, 'Wombat code']);
    assert.deepEqual(found[code], [], 'the code is in clear nowhere in the database');
    assert.ok(found['Wombat code'].length > 0, `the search finds what is there: ${JSON.stringify(found)}`);
    const again = await alice.post('/verify', { to: ADDRESS, channel: 'email' });
    assert.equal(again.statusCode, 429, again.body);
    assert.match(again.json().message, /^A code went to this address less than 30 s ago/);

    const suppressed = await alice.post('/email/suppressions', { email: 'gone@example.com' });
    assert.equal(suppressed.statusCode, 201, suppressed.body);
    const refused = await alice.post('/verify', { to: 'gone@example.com', channel: 'email' });
    assert.equal(refused.statusCode, 422, refused.body);
    assert.deepEqual(
      refused.json().errors.map((e: { field: string }) => e.field),
      ['to'],
    );
    const bad = await alice.post('/verify', { to: 'not an address', channel: 'email' });
    assert.equal(bad.statusCode, 400, bad.body);
    const foreign = await alice.post('/verify', {
      to: 'bob@example.com',
      channel: 'email',
      senderFrom: 'x@elsewhere.org',
    });
    assert.equal(foreign.statusCode, 422, foreign.body);
    assert.deepEqual(
      foreign.json().errors.map((e: { field: string }) => e.field),
      ['senderFrom'],
    );
  });

  it('tries a code by email again after a relay’s 4xx though its address has no marketing consent', async () => {
    const alice = await start({ EMAIL_TRANSPORT: 'sandbox:?defer=^ada@' });
    await alice.upsert([{ email: ADDRESS, emailOptIn: false }]);
    const started = await alice.post('/verify', { to: ADDRESS, channel: 'email' });
    assert.equal(started.statusCode, 201, started.body);
    await api!.drain();
    api!.clock.advance(60_000);
    await api!.drain();
    const [row] = await api!.t.ctx.db
      .selectFrom('send_recipients')
      .select(['status', 'attempts'])
      .where('address', '=', ADDRESS)
      .execute();
    assert.deepEqual([row.status, Number(row.attempts)], ['Deferred', 2], 'tried twice, not dropped');
  });

  it('gives a code by email up when the relay refuses it for now until after it expired', async () => {
    const alice = await start({ EMAIL_TRANSPORT: 'sandbox:?defer=^ada@' });
    const started = await alice.post('/verify', { to: ADDRESS, channel: 'email', ttlSeconds: 300 });
    assert.equal(started.statusCode, 201, started.body);
    await api!.drain();
    // Tried again after a minute; the next wait, 5 minutes, ends after the code's 5 minutes.
    api!.clock.advance(60_000);
    await api!.drain();
    const row = await api!.t.ctx.db
      .selectFrom('send_recipients')
      .select(['status', 'attempts', 'retry_at', 'error'])
      .where('address', '=', ADDRESS)
      .executeTakeFirstOrThrow();
    assert.deepEqual([row.status, Number(row.attempts), row.retry_at], ['Bounce', 2, null], JSON.stringify(row));
    assert.match(String(row.error), /^soft bounce: given up as its code expires before a next try, and 2 attempts/);
  });

  it('never hands the relay a code by email whose worker came only after it expired', async () => {
    const alice = await start();
    const started = await alice.post('/verify', { to: ADDRESS, channel: 'email', ttlSeconds: 60 });
    assert.equal(started.statusCode, 201, started.body);
    api!.clock.advance(60_000);
    await api!.drain();
    const row = await api!.t.ctx.db
      .selectFrom('send_recipients')
      .select(['status', 'error'])
      .where('address', '=', ADDRESS)
      .executeTakeFirstOrThrow();
    assert.deepEqual(row, {
      status: 'Bounce',
      error: 'soft bounce: not sent: its code expired before a relay took it',
    });
    assert.deepEqual((await alice.get(`/sandbox/email?to=${ADDRESS}`)).json().messages, []);
  });
});
