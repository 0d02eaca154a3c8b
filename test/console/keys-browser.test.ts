import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { SCOPES } from '../../src/auth/api-keys.ts';
import { ENDPOINT_EVENTS } from '../../src/webhooks/endpoints.ts';
import { forEachDatabase } from '../support/databases.ts';
import { bearer } from '../support/app.ts';
import { consoleSession } from './browser.ts';
import * as integrations from '../../web/src/integrations.ts';

/**
 * The console's API keys and webhook endpoints (issue 33) in headless Chromium against a real
 * listener: a key made with one scope (the password asked again), read from the page once, used
 * on and off its scope, its last use shown, revoked and refused; an endpoint added, with the
 * API's 400, 409 and 422 shown by field, and deleted; the audit log naming the console for each
 * change. Each page is screenshot and checked by axe-core, as in browser.test.ts.
 */
forEachDatabase((dialect) => {
  const session = consoleSession(dialect, `${dialect}-keys`, { clock: new ManualClock(Date.now()) });
  const { heading, table, row, open } = session;
  const withKey = (key: string, method: 'GET' | 'POST', url: string, payload?: object) =>
    session.api.t.app.inject({ method, url, headers: bearer(key), payload });

  it('offers the scopes and event types the API takes, in its order', () => {
    assert.deepEqual(
      integrations.SCOPES.map((s) => s.value),
      [...SCOPES],
    );
    assert.deepEqual(
      integrations.ENDPOINT_EVENTS.map((e) => e.value),
      [...ENDPOINT_EVENTS],
    );
  });

  it('signs in', () => session.signIn());

  let key = '';
  let apiKeyId = '';

  it('creates a key with one scope, the password asked again, and shows the key once', async () => {
    await session.page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'API keys' }).click();
    await heading('API keys').waitFor();
    await table('API keys').getByText('The account has no API key.').waitFor();
    const form = session.page.getByRole('form', { name: 'Create an API key' });
    await form.getByLabel('Name').fill('CRM sync');
    await form.getByRole('checkbox', { name: 'contacts:write', exact: true }).check();

    // A wrong password: the API's 403 is said beside the password field, and no key is made.
    session.refuse('/api-keys');
    await form.getByLabel('Your password').fill('not the password');
    await form.getByRole('button', { name: 'Create key' }).click();
    await form.getByText('is incorrect', { exact: true }).waitFor();
    assert.equal(await form.getByLabel('Your password').getAttribute('aria-invalid'), 'true');
    assert.equal(await form.getByLabel('Your password').inputValue(), '', 'the password is not kept');
    assert.equal((await session.alice.get('/api-keys')).json().apiKeys.length, 0);
    await session.browser.look('api-key-refused');

    await form.getByLabel('Your password').fill(session.alice.account.password);
    await form.getByRole('button', { name: 'Create key' }).click();
    const shown = session.page.getByLabel('API key CRM sync');
    await shown.waitFor();
    key = await shown.inputValue();
    assert.match(key, /^hk_[\w-]{43}$/);
    assert.equal(await shown.getAttribute('readonly'), '');
    await session.page.getByText('you will not see it again').waitFor();
    await session.browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: session.base });
    await session.page.getByRole('button', { name: 'Copy the key' }).click();
    await session.page.getByRole('status').filter({ hasText: 'Copied.' }).waitFor();
    assert.equal(await session.page.evaluate(() => navigator.clipboard.readText()), key);

    const [made] = (await session.alice.get('/api-keys')).json().apiKeys;
    apiKeyId = made.apiKeyId;
    assert.deepEqual([made.name, made.scopes, made.expiresAt], ['CRM sync', ['contacts:write'], null]);
    const listed = row(table('API keys'), 'CRM sync');
    assert.match(await listed.innerText(), /contacts:write[\s\S]*Never[\s\S]*Never/);
    await session.browser.look('api-key-created');

    // Hidden, it is gone from the page; a reload never shows it again.
    await session.page.getByRole('button', { name: 'I have copied it: hide the key' }).click();
    assert.equal(await session.page.getByLabel('API key CRM sync').count(), 0);
    await session.page.reload();
    await heading('API keys').waitFor();
    assert.ok(!(await session.page.content()).includes(key));
  });

  it('lets the key in on its scope only, and shows its last use after a reload', async () => {
    const list = await withKey(key, 'POST', '/lists', { name: 'Made with a key' });
    assert.equal(list.statusCode, 201, list.body);
    assert.equal((await withKey(key, 'GET', '/account')).statusCode, 403, 'read is not its scope');
    assert.equal((await withKey(key, 'GET', '/api-keys')).statusCode, 403, 'keys never manage keys');

    await session.page.reload();
    await heading('API keys').waitFor();
    const listed = row(table('API keys'), 'CRM sync');
    const lastUsed = listed.getByRole('cell').nth(4);
    assert.notEqual(await lastUsed.innerText(), 'Never');
    assert.ok(await lastUsed.locator('time').getAttribute('datetime'));
    await session.browser.look('api-key-used');
  });

  it('revokes the key after a confirmation, and the API refuses it', async () => {
    const listed = row(table('API keys'), 'CRM sync');
    await listed.getByRole('button', { name: 'Revoke CRM sync' }).click();
    await listed.getByRole('button', { name: 'Keep the key' }).click();
    assert.equal((await withKey(key, 'POST', '/lists', { name: 'Still allowed' })).statusCode, 201);

    await listed.getByRole('button', { name: 'Revoke CRM sync' }).click();
    await session.page.getByText('Revoke the key CRM sync?').waitFor();
    await session.browser.look('api-key-revoking');
    await session.page.getByRole('button', { name: 'Yes, revoke the key' }).click();
    await session.page.getByRole('status').filter({ hasText: 'The key CRM sync is revoked.' }).waitFor();
    await table('API keys').getByText('The account has no API key.').waitFor();
    const refusedKey = await withKey(key, 'POST', '/lists', { name: 'Too late' });
    assert.equal(refusedKey.statusCode, 401);
    assert.match(refusedKey.json().message, /not valid/);
  });

  it('adds a webhook endpoint, showing the API’s 400, 422 and 409 by field, and deletes it', async () => {
    await open('/webhooks', 'Webhooks');
    const form = session.page.getByRole('form', { name: 'Add a webhook endpoint' });
    const url = form.getByLabel('URL (http or https)');
    // The password is asked again for each endpoint, and not kept after it.
    const add = async () => {
      await form.getByLabel('Your password').fill(session.alice.account.password);
      await form.getByRole('button', { name: 'Add endpoint' }).click();
    };
    session.refuse('/webhooks/endpoints');

    // No event chosen, and a URL that is not one: 400.
    await url.fill('ftp://hooks.example.com/x');
    await add();
    await form.getByRole('alert').waitFor();
    assert.equal(await url.getAttribute('aria-invalid'), 'true');
    await form.locator('#endpoint-url-problem').filter({ hasText: 'http or https' }).waitFor();
    await form.locator('#endpoint-events-problem').filter({ hasText: 'must not be empty' }).waitFor();
    await session.browser.look('endpoint-refused');

    // The cloud metadata service: 422, by the URL.
    await url.fill('http://169.254.169.254/latest');
    await form.getByRole('checkbox', { name: 'sms.status', exact: true }).check();
    await add();
    await form
      .locator('#endpoint-url-problem')
      .filter({ hasText: /link-local|metadata/ })
      .waitFor();

    await url.fill('http://127.0.0.1:9/herald');
    await add();
    await form.getByRole('status').filter({ hasText: 'http://127.0.0.1:9/herald is added.' }).waitFor();
    const endpoints = table('Webhook endpoints, oldest first');
    await row(endpoints, 'http://127.0.0.1:9/herald').filter({ hasText: 'sms.status' }).waitFor();
    assert.deepEqual(
      (await session.alice.get('/webhooks/endpoints'))
        .json()
        .endpoints.map((e: { url: string; events: string[] }) => [e.url, e.events]),
      [['http://127.0.0.1:9/herald', ['sms.status']]],
    );

    // The same URL, written otherwise: 409, by the URL.
    await url.fill('HTTP://127.0.0.1:9/herald');
    await form.getByRole('checkbox', { name: 'email.events', exact: true }).check();
    await add();
    await form.locator('#endpoint-url-problem').filter({ hasText: 'already an endpoint' }).waitFor();
    await row(endpoints, 'http://127.0.0.1:9/herald').filter({ hasText: 'Takes events' }).waitFor();
    await session.browser.look('endpoint-added');

    // Its receiver answers 410 Gone (test/webhooks/endpoints.test.ts): the page says so.
    await session.api.t.ctx.db.updateTable('webhook_endpoints').set({ disabled_at: Date.now() }).execute();
    await open('/webhooks', 'Webhooks');
    await row(endpoints, 'http://127.0.0.1:9/herald').filter({ hasText: 'its receiver answered 410 Gone' }).waitFor();

    const listed = row(endpoints, 'http://127.0.0.1:9/herald');
    await listed.getByRole('button', { name: 'Delete http://127.0.0.1:9/herald' }).click();
    await listed.getByRole('button', { name: 'Keep the endpoint' }).click();
    assert.equal(
      (await session.alice.get('/webhooks/endpoints')).json().endpoints.length,
      1,
      'kept when not confirmed',
    );
    await listed.getByRole('button', { name: 'Delete http://127.0.0.1:9/herald' }).click();
    await session.page.getByRole('button', { name: 'Yes, delete the endpoint' }).click();
    await session.page.getByRole('status').filter({ hasText: 'http://127.0.0.1:9/herald is deleted.' }).waitFor();
    await endpoints.getByText('No endpoint').waitFor();
    assert.equal((await session.alice.get('/webhooks/endpoints')).json().endpoints.length, 0);
  });

  it('shows each change in the audit log, made by the console', async () => {
    await open('/audit', 'Audit log');
    const log = table('Audit log, newest first');
    for (const action of ['apiKey.created', 'apiKey.revoked', 'webhookEndpoint.created', 'webhookEndpoint.deleted'])
      assert.match(await row(log, action).innerText(), /Console/, action);
    assert.match(await row(log, 'apiKey.revoked').innerText(), new RegExp(apiKeyId));
  });

  it('fits a phone’s width (375 px) without sideways scrolling', async () => {
    await session.page.setViewportSize({ width: 375, height: 800 });
    for (const [path, title] of [
      ['/api-keys', 'API keys'],
      ['/webhooks', 'Webhooks'],
    ]) {
      await open(path, title);
      assert.equal(await session.page.evaluate(() => document.documentElement.scrollWidth), 375, path);
    }
    await session.page.setViewportSize({ width: 1280, height: 900 });
  });
});
