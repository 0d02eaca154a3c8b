import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, it } from 'node:test';
import { POLL_MS } from '../../src/sms/transports/routed.ts';
import { ManualClock } from '../../src/clock.ts';
import { forEachDatabase } from '../support/databases.ts';
import { buildContact, type ApiClient } from '../support/client.ts';
import { ADMIN_TOKEN, bearer } from '../support/app.ts';
import { base64, buildBatch } from '../email/support.ts';
import { trackingKey } from '../../src/email/tracking.ts';
import { trackingToken } from '../../src/email/tracking-tokens.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import { consoleSession } from './browser.ts';
import { formatNumber } from '../../web/src/numbers.ts';

/**
 * The console (issue 15) in headless Chromium against a real listener: what a user does in it,
 * each change checked through the API as a bearer client sees it. Each page is screenshot to
 * test-output/console/<database>-<page>.png for a reviewer, and checked by axe-core. No page
 * logs a browser error but the refusals a test asks for.
 */
forEachDatabase((dialect) => {
  // The browser's clock is the real one, so the server's starts at the real now: "the last 30 days" agree.
  const session = consoleSession(dialect, dialect, {
    clock: new ManualClock(Date.now()),
    env: { SMS_TRANSPORT: 'sandbox:?fail=^9198111', EMAIL_TRANSPORT: 'sandbox:?bounce=^gone@' },
  });
  const { heading, table, row, open } = session;
  let bob: ApiClient;
  let receiver: Receiver;

  before(async () => {
    bob = await session.api.client();
    // A price on SMS_TRANSPORT's connection, for the cost on the usage and send pages.
    const routes = { routes: [{ prefix: '', smsc: ['default'], pricePerPart: '0.0075', currency: 'EUR' }] };
    const priced = await session.api.t.app.inject({
      method: 'PUT',
      url: '/admin/sms-routes',
      headers: bearer(ADMIN_TOKEN),
      payload: routes,
    });
    assert.equal(priced.statusCode, 200, priced.body);
    receiver = await startReceiver();
    // The worker's transport read the routes as it was made, and reads them again within 2 s of a change
    // (sms/transports/routed.ts): the first send must find the price. A read under way as the change
    // committed keeps the table before it for a poll from its end, not from the change: two polls.
    await new Promise((resolve) => setTimeout(resolve, 2 * POLL_MS));
  });
  after(async () => {
    await receiver?.close();
  });

  const sendStatus = async (path: string) => (await session.alice.get(path)).json().status as string;

  it('serves a page whose scripts and styles are all files of its own (the CSP allows no inline ones)', async () => {
    const response = await session.api.t.app.inject({ method: 'GET', url: '/console/' });
    assert.equal(response.statusCode, 200);
    assert.match(response.headers['content-security-policy'] as string, /script-src 'self'/);
    const html = response.body;
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
    assert.doesNotMatch(html, /<style|\sstyle=/, 'no inline style');
    assert.equal(response.headers['cache-control'], 'no-cache', 'a new release is seen at the next load');
    const deep = await session.api.t.app.inject({
      method: 'GET',
      url: '/console/sms/00000000-0000-4000-8000-000000000000',
    });
    assert.equal(deep.statusCode, 200);
    assert.equal(deep.body, html, "a page's address loads the app, which routes it");
    const script = /<script[^>]*\bsrc="(\/console\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    assert.ok(script, html);
    const asset = await session.api.t.app.inject({ method: 'GET', url: script });
    assert.equal(asset.statusCode, 200);
    assert.match(String(asset.headers['content-type']), /javascript/);
    assert.equal(
      asset.headers['cache-control'],
      'public, max-age=31536000, immutable',
      'hashed names: cached for a year',
    );
    assert.equal(
      (await session.api.t.app.inject({ method: 'GET', url: '/console/assets/missing-0000.js' })).statusCode,
      404,
    );
  });

  it('serves its icon, and /favicon.ico for every other page of the origin', async () => {
    for (const url of ['/favicon.ico', '/console/favicon.svg']) {
      const icon = await session.api.t.app.inject({ method: 'GET', url });
      assert.equal(icon.statusCode, 200, url);
      assert.equal(icon.headers['content-type'], 'image/svg+xml', url);
      assert.match(icon.body, /^<svg /);
    }
    const html = (await session.api.t.app.inject({ method: 'GET', url: '/console/' })).body;
    assert.match(html, /<link rel="icon" type="image\/svg\+xml" href="\/console\/favicon.svg">/);
  });

  it('refuses a wrong password, then signs in', async () => {
    // Before signing in, the session's read; then the wrong password.
    session.refuse('/console/session');
    await session.page.goto(`${session.base}/console/`);
    await session.page.getByRole('heading', { name: 'Sign in to Herald' }).waitFor();
    await session.page.getByLabel('User name').fill(session.alice.account.userName);
    await session.page.getByLabel('Password').fill('not the password');
    await session.page.getByLabel('Private token').fill(session.alice.account.privateToken);
    await session.page.getByRole('button', { name: 'Sign in' }).click();
    await session.page.getByRole('alert').filter({ hasText: 'wrong' }).waitFor();
    await session.browser.look('sign-in');

    await session.page.getByLabel('Password').fill(session.alice.account.password);
    await session.page.getByRole('button', { name: 'Sign in' }).click();
    await heading('Overview').waitFor();
    const cookies = await session.browser.context.cookies(session.base);
    const sessionCookie = cookies.find((cookie) => cookie.name === 'herald_console');
    assert.ok(sessionCookie, 'the session cookie is set');
    assert.equal(sessionCookie.httpOnly, true);
    assert.equal(sessionCookie.sameSite, 'Strict');
    assert.deepEqual(
      await session.page.evaluate(() => [localStorage.length, sessionStorage.length]),
      [0, 0],
      'no token kept in storage',
    );
  });

  it('finds an SMS batch and an email batch sent through the API: what they said, recipients, charts', async () => {
    const contact = buildContact({ email: 'ada@example.com', emailOptIn: true });
    await session.alice.upsert([contact]);
    const queueId = await session.alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'Your order shipped',
      recipients: [{ mobileNo: '919812345601' }, { mobileNo: '919811111111' }],
    });
    // Styles, an image from the web and a script: the preview shows the text, and none of them logs an error.
    const html =
      '<style>h1 { color: red }</style><h1 style="color: blue">Spring sale</h1>' +
      '<p>Dear [firstName], welcome.</p><img src="https://images.example.com/banner.png" alt="Banner">' +
      '<script>document.body.textContent = "ran"</script>';
    const batchId = await session.alice.accept(
      '/email/batch',
      buildBatch(
        { subject: 'Spring at Herald', emailBody: base64(html) },
        { recipients: [{ to: 'ada@example.com' }, { to: 'gone@example.com' }] },
      ),
    );
    await session.api.drain();
    // Ada opens hers: the funnel's third step.
    const ada = await session.api.t.ctx.db
      .selectFrom('send_recipients')
      .select('id')
      .where('send_id', '=', batchId)
      .where('address', '=', 'ada@example.com')
      .executeTakeFirstOrThrow();
    const pixel = trackingToken(trackingKey(session.api.t.ctx.encryptionKey).current, {
      recipientId: Number(ada.id),
      sendId: batchId,
      kind: 'open',
    });
    assert.equal(
      (
        await session.api.t.app.inject({
          method: 'GET',
          url: `/t/o/${pixel}`,
          headers: { 'user-agent': 'Mozilla/5.0 (Macintosh)' },
        })
      ).statusCode,
      200,
    );

    await open('/', 'Overview');
    for (const name of ['Messages sent per day', 'Delivery rate per day']) {
      const canvas = session.page.getByRole('figure', { name }).locator('canvas');
      await canvas.waitFor();
      const box = await canvas.boundingBox();
      assert.ok(box && box.width > 100 && box.height > 100, `${name} is drawn: ${JSON.stringify(box)}`);
    }
    // Ids are shown whole, in tables as on their pages.
    await row(table('Latest SMS sends'), queueId).waitFor();
    await row(table('Latest email batches'), batchId).waitFor();
    await session.browser.look('overview');

    await session.page.getByRole('link', { name: 'SMS', exact: true }).click();
    await heading('SMS sends').waitFor();
    await session.browser.look('sms-sends');
    await session.page.getByRole('link', { name: queueId, exact: true }).click();
    await heading('SMS send').waitFor();
    await session.browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: session.base });
    await session.page.getByRole('button', { name: 'Copy the queue id' }).click();
    await session.page.getByRole('status').filter({ hasText: 'Copied.' }).waitFor();
    assert.equal(await session.page.evaluate(() => navigator.clipboard.readText()), queueId);
    const sms = session.page.getByRole('region', { name: 'Message' });
    assert.match(await sms.innerText(), /Sender name\s+HERALD\s+Text\s+Your order shipped/);
    const smsRecipients = table('Recipients');
    assert.match(await row(smsRecipients, '919812345601').innerText(), /Delivered\s+1\s+0\.0075 EUR\s+default\b/);
    assert.match(await row(smsRecipients, '919811111111').innerText(), /Failed/);
    const messageId = (await session.alice.get(`/sms/${queueId}`)).json().recipients[0].messageId as string;
    await row(smsRecipients, messageId).waitFor();
    await session.browser.look('sms-send');
    // The filter reads the recipients at one status from the API (?status=).
    await session.page.getByLabel('Status').selectOption('Failed');
    await row(smsRecipients, '919812345601').waitFor({ state: 'detached' });
    await row(smsRecipients, '919811111111').waitFor();
    assert.deepEqual(await smsRecipients.locator('tbody tr td:first-child').allInnerTexts(), ['919811111111']);
    await session.page.getByLabel('Status').selectOption('');
    await row(smsRecipients, '919812345601').waitFor();

    await open('/email', 'Email batches');
    await session.browser.look('email-batches');
    await session.page.getByRole('link', { name: batchId, exact: true }).click();
    await heading('Email batch').waitFor();
    const message = session.page.getByRole('region', { name: 'Message' });
    assert.match(await message.innerText(), /From\s+Herald News <news@mail\.localhost>\s+Subject\s+Spring at Herald/);
    const preview = session.page.getByTitle("Preview of the email's HTML");
    assert.equal(await preview.getAttribute('sandbox'), '', 'no script, form, window or origin of its own');
    const frame = session.page.frameLocator('iframe');
    await frame.getByRole('heading', { name: 'Spring sale' }).waitFor();
    assert.match(await frame.locator('body').innerText(), /Dear \[firstName\], welcome\./);
    assert.doesNotMatch(await frame.locator('body').innerText(), /ran/, 'its script did not run');
    assert.doesNotMatch((await preview.getAttribute('srcdoc')) ?? '', /images\.example\.com|<script|style=/);
    const emailRecipients = table('Recipients');
    assert.match(await row(emailRecipients, 'ada@example.com').innerText(), /Delivered/);
    assert.match(await row(emailRecipients, 'gone@example.com').innerText(), /Bounce/);
    await session.page.getByLabel('Status').selectOption('Bounce');
    await row(emailRecipients, 'ada@example.com').waitFor({ state: 'detached' });
    await row(emailRecipients, 'gone@example.com').waitFor();
    await session.page.getByLabel('Status').selectOption('');
    await row(table('Bounces and drops with their reasons'), 'gone@example.com').waitFor();
    assert.match(
      await session.page.getByRole('list', { name: 'Funnel' }).innerText(),
      /Processed\s+2 \(100%\)[\s\S]*Delivered\s+1 \(50%\)[\s\S]*Opened\s+1 \(50%\)[\s\S]*Clicked\s+0 \(0%\)/,
    );
    await session.browser.look('email-batch');

    await open('/contacts', 'Contacts');
    await session.page.getByLabel('Number or address').fill('ada@example.com');
    await session.page.getByRole('button', { name: 'Search' }).click();
    await row(table('Contacts found'), 'ada@example.com').getByRole('link').click();
    await heading('Contact').waitFor();
    await row(table('Messages sent to this contact, newest first'), batchId).waitFor();
    await session.browser.look('contact');
    await open('/lists', 'Lists');
    await session.page.getByRole('link', { name: 'All contacts' }).click();
    await row(table('Contacts of the list'), 'ada@example.com').waitFor();
    await session.browser.look('list');
  });

  it('cancels a scheduled SMS send and a scheduled email batch', async () => {
    const tomorrow = new Date(session.api.clock.now() + 86_400_000).toISOString();
    const queueId = await session.alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'Later',
      recipients: [{ mobileNo: '919812345602' }],
      scheduleDateTime: tomorrow,
    });
    await open(`/sms/${queueId}`, 'SMS send');
    await session.page.getByRole('button', { name: 'Cancel send' }).click();
    await session.page.getByRole('status').filter({ hasText: 'cancelled' }).waitFor();
    await session.page.getByRole('button', { name: 'Cancel send' }).waitFor({ state: 'detached' });
    // The recipients are read again after the cancel: wait for the new read, not the old rows.
    await row(table('Recipients'), '919812345602').filter({ hasText: 'Cancelled' }).waitFor();
    assert.equal(await sendStatus(`/sms/${queueId}`), 'Cancelled');
    await session.browser.look('sms-send-cancelled');

    const batchId = await session.alice.accept(
      '/email/batch',
      buildBatch({ scheduleDateTime: tomorrow }, { recipients: [{ to: 'later@example.com' }] }),
    );
    await open(`/email/${batchId}`, 'Email batch');
    await session.page.getByRole('button', { name: 'Cancel batch' }).click();
    await session.page.getByRole('status').filter({ hasText: 'cancelled' }).waitFor();
    await row(table('Recipients'), 'later@example.com').filter({ hasText: 'Cancelled' }).waitFor();
    assert.equal(await sendStatus(`/email/batch/${batchId}`), 'Cancelled');
  });

  it("says a sealed send's text is sealed, and never shows it", async () => {
    const queueId = await session.alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'Zebra passcode [code]',
      isBodyEncrypted: true,
      recipients: [
        {
          mobileNo: '919812345604',
          personalizationSubstitutionTags: [{ tagName: '[code]', tagValue: '739184' }],
        },
      ],
    });
    await session.api.drain();
    await open(`/sms/${queueId}`, 'SMS send');
    const message = session.page.getByRole('region', { name: 'Message' });
    await message.getByText('Sealed: the text was sent with isBodyEncrypted').waitFor();
    await row(table('Recipients'), '919812345604').filter({ hasText: 'Delivered' }).waitFor();
    for (const secret of ['Zebra', '739184']) {
      assert.ok(!(await session.page.content()).includes(secret), `${secret} is nowhere in the page`);
    }
    await session.browser.look('sms-send-sealed');
  });

  it('adds and removes a suppression', async () => {
    await open('/suppressions', 'Suppressions');
    const sms = session.page.getByRole('region', { name: 'SMS suppressions' });
    await sms.getByRole('textbox', { name: /^Number/ }).fill('919812345677');
    await sms.getByRole('textbox', { name: /^Reason/ }).fill('asked by phone');
    // By keyboard: Enter in the form submits it.
    await session.page.keyboard.press('Enter');
    await row(sms.getByRole('table'), '919812345677').waitFor();
    assert.deepEqual(
      (await session.alice.get('/sms/suppressions'))
        .json()
        .suppressions.map((s: { number: string; reason: string }) => [s.number, s.reason]),
      [['919812345677', 'asked by phone']],
    );
    await session.browser.look('suppressions');

    await row(sms.getByRole('table'), '919812345677').getByRole('button', { name: 'Remove' }).focus();
    await session.page.keyboard.press('Enter');
    await sms.getByText('No longer suppressed', { exact: false }).waitFor();
    await row(sms.getByRole('table'), '919812345677').waitFor({ state: 'detached' });
    assert.deepEqual((await session.alice.get('/sms/suppressions')).json().suppressions, []);
  });

  it('retries a webhook delivery that failed', async () => {
    receiver.reply({ status: 500 });
    await session.alice.upsert([buildContact()], { webhookUrl: receiver.url });
    assert.equal(receiver.received.length, 1);
    const [failed] = (await session.alice.get('/webhooks/deliveries')).json().deliveries;
    assert.equal(failed.lastStatusCode, 500);

    await open('/', 'Overview');
    await row(table('Failing webhook deliveries, newest first'), failed.id).waitFor();
    await open('/webhooks', 'Webhooks');
    const secret = (await session.alice.get('/webhooks/secret')).json().secret as string;
    await session.page.getByText(secret).waitFor();
    const deliveries = table('Webhook deliveries, newest first');
    assert.match(await row(deliveries, failed.id).innerText(), /HTTP 500/);
    await session.browser.look('webhooks');
    await row(deliveries, failed.id).getByRole('button', { name: 'Retry' }).click();
    await session.page.getByRole('status').filter({ hasText: 'posted again' }).waitFor();
    await session.api.drain();
    assert.equal(receiver.received.length, 2);
    assert.equal(receiver.received[1].headers['webhook-id'], receiver.received[0].headers['webhook-id']);
    const retried = (await session.alice.get(`/webhooks/deliveries/${failed.id}`)).json();
    assert.equal(retried.status, 'delivered');

    await row(deliveries, failed.id).getByRole('link').click();
    await heading('Webhook delivery').waitFor();
    await session.browser.look('webhook-delivery');

    await open('/webhooks', 'Webhooks');
    await session.page.getByRole('button', { name: 'Rotate secret' }).click();
    await session.page.getByRole('button', { name: 'Yes, rotate the secret' }).click();
    await session.page.getByRole('status').filter({ hasText: 'rotated' }).waitFor();
    const rotated = (await session.alice.get('/webhooks/secret')).json().secret as string;
    assert.notEqual(rotated, secret);
    await session.page.getByText(rotated).waitFor();

    // The rotation is in the audit log, made by the console.
    await open('/audit', 'Audit log');
    assert.match(await row(table('Audit log, newest first'), 'webhookSecret.rotated').innerText(), /Console/);
  });

  it('charts the usage, and downloads the CSV, whose numbers are those of GET /usage', async () => {
    await open('/usage', 'Usage');
    await session.page.getByRole('table', { name: /^Usage per day/ }).waitFor();
    const chart = session.page.getByRole('figure', { name: 'Billed per day' });
    const box = await chart.locator('canvas').boundingBox();
    assert.ok(box && box.width > 100 && box.height > 100, `the usage chart is drawn: ${JSON.stringify(box)}`);
    // Until a day is pointed at, the legend gives the span's totals.
    assert.match(await chart.locator('.u-legend').innerText(), /SMS parts\s*2\s*Emails\s*2$/);
    await session.browser.look('usage');
    const [download] = await Promise.all([
      session.page.waitForEvent('download'),
      session.page.getByRole('link', { name: 'Download CSV' }).click(),
    ]);
    const csv = readFileSync(await download.path(), 'utf8')
      .trim()
      .split(/\r?\n/)
      .map((line) => line.split(','));
    const [header, ...days] = csv;
    assert.deepEqual(header.slice(0, 5), [
      'date',
      'sms_messages',
      'sms_parts_gsm7',
      'sms_parts_ucs2',
      'email_messages',
    ]);
    const href = await session.page.getByRole('link', { name: 'Download CSV' }).getAttribute('href');
    const query = new URL(href!, session.base).searchParams;
    const usage = (await session.alice.get(`/usage?from=${query.get('from')}&to=${query.get('to')}`)).json();
    assert.equal(days.length, usage.days.length);
    for (const [i, day] of usage.days.entries()) {
      const fields = Object.fromEntries(header.map((name, j) => [name, days[i][j]]));
      assert.equal(fields.date, day.date);
      assert.deepEqual(
        [fields.sms_messages, fields.sms_parts_gsm7, fields.sms_parts_ucs2, fields.email_messages].map(Number),
        [day.sms.messages, day.sms.parts.gsm7, day.sms.parts.ucs2, day.email.messages],
      );
    }
    assert.equal(usage.totals.sms.messages, 2, 'the two SMS the operator took: one of the batch, the sealed one');
    assert.equal(usage.totals.email.messages, 2);
    assert.deepEqual(usage.totals.cost, [{ amount: '0.015', currency: 'EUR' }], 'two parts at 0.0075');
    const total = row(session.page.getByRole('table', { name: /^Usage per day/ }), 'Total');
    assert.match(await total.innerText(), /\b0\.015 EUR\b/, 'the cost shown beside the parts');
  });

  it("shows Verify's last 30 days: started, approved, conversion by country and blocked attempts", async () => {
    // The codes' SMS are billed once drained: this runs after the usage test, whose totals are exact.
    const day = (days: number) => new Date(session.api.clock.now() + days * 86_400_000).toISOString().slice(0, 10);
    // A span holding today in any zone: the page's 30 days hold all that this run made.
    const stats = async () => (await session.alice.get(`/verify/stats?from=${day(-1)}&to=${day(1)}`)).json();
    const before = await stats();
    const numbers = ['919812345631', '919812345632', '919812345633'];
    const ids: string[] = [];
    for (const to of numbers) {
      const started = await session.alice.post('/verify', { to });
      assert.equal(started.statusCode, 201, started.body);
      ids.push(started.json().verificationId);
    }
    await session.api.drain();
    // Two of the three approved, each with the code the sandbox's read opens: the end of its text.
    for (const [i, id] of ids.slice(0, 2).entries()) {
      const sent = (await session.alice.get(`/sandbox/sms?recipient=${numbers[i]}`)).json().messages[0].text as string;
      const code = /(\d+)$/.exec(sent)?.[1];
      assert.ok(code, `the sandbox opens the code: ${sent}`);
      const checked = await session.alice.post(`/verify/${id}/check`, { code });
      assert.equal(checked.json().status, 'approved', checked.body);
    }
    const guard = (verify: object) =>
      session.api.t.app.inject({
        method: 'PATCH',
        url: '/account',
        headers: bearer(session.alice.token),
        payload: { verify },
      });
    assert.equal((await guard({ allowedCountries: ['IN'] })).statusCode, 200);
    assert.equal(
      (await session.alice.post('/verify', { to: '447400123456' })).statusCode,
      422,
      'a GB number is blocked',
    );
    assert.equal((await guard({ allowedCountries: null })).statusCode, 200);
    const after = await stats();
    assert.deepEqual(
      [after.started - before.started, after.approved - before.approved, after.blockedBy.country],
      [3, 2, before.blockedBy.country + 1],
    );

    await open('/', 'Overview');
    await session.page.getByRole('link', { name: 'Verify', exact: true }).click();
    await heading('Verify').waitFor();
    const india = after.byCountry.find((c: { country: string }) => c.country === 'IN');
    const percent = (n: number) => `${formatNumber(n * 100, session.alice.account.row.locale)}%`;
    const countries = table('Conversion by country');
    assert.match(
      await row(countries, 'IN').innerText(),
      new RegExp(`^IN\\s+${india.started}\\s+${india.approved}\\s+${percent(india.approved / india.started)}$`),
    );
    const totals = (await session.page.getByRole('region', { name: 'Verifications' }).innerText()).replace(/\s+/g, ' ');
    assert.ok(
      totals.includes(
        `Started ${after.started} Approved ${after.approved} Failed ${after.failed} Expired ${after.expired} ` +
          `Conversion rate ${percent(after.conversionRate)}`,
      ),
      totals,
    );
    const blocked = table('Blocked attempts by reason');
    assert.match(
      await row(blocked, 'Country not allowed').innerText(),
      new RegExp(`^Country not allowed\\s+${after.blockedBy.country}\\s`),
    );
    assert.match(
      await row(blocked, 'Prefix limit').innerText(),
      new RegExp(`^Prefix limit\\s+${after.blockedBy.prefix}\\s`),
    );
    await session.browser.look('verify');
  });

  it("shows another account's send as not found", async () => {
    const response = await bob.post('/sms/batch', {
      senderName: 'HERALD',
      body: 'Bob',
      recipients: [{ mobileNo: '919812345603' }],
    });
    assert.equal(response.statusCode, 202);
    const unknownBatch = '00000000-0000-4000-8000-000000000000';
    session.refuse(`/sms/${response.json().data.QueueId}`, `/email/batch/${unknownBatch}`);
    await open(`/sms/${response.json().data.QueueId}`, 'Not found');
    await open(`/email/${unknownBatch}`, 'Not found');
    await session.browser.look('not-found');
  });

  it('refuses a change without the CSRF token', async () => {
    session.refuse('/sms/suppressions');
    await open('/', 'Overview');
    const status = await session.page.evaluate(async () => {
      const response = await fetch('/sms/suppressions', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ number: '919812345688' }),
      });
      return response.status;
    });
    assert.equal(status, 403);
    assert.deepEqual((await session.alice.get('/sms/suppressions')).json().suppressions, []);
  });

  it('fits a phone: the page does not scroll sideways, tables scroll in their wrapper', async () => {
    await session.page.setViewportSize({ width: 375, height: 800 });
    await open('/sms', 'SMS sends');
    assert.equal(await session.page.evaluate(() => document.documentElement.scrollWidth), 375);
    await session.browser.look('sms-sends-375');
    await session.page.setViewportSize({ width: 1280, height: 900 });
  });

  it('signs out', async () => {
    await open('/', 'Overview');
    await session.page.getByRole('button', { name: 'Sign out' }).click();
    session.refuse('/console/session');
    await session.page.getByRole('heading', { name: 'Sign in to Herald' }).waitFor();
    assert.equal(
      await session.page.evaluate(async () => (await fetch('/console/session', { credentials: 'same-origin' })).status),
      401,
    );
  });
});
