import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { Locator } from 'playwright-core';
import { ManualClock } from '../../src/clock.ts';
import { bearer } from '../support/app.ts';
import { forEachDatabase } from '../support/databases.ts';
import { consoleSession } from './browser.ts';

/**
 * What the console shows of the preflight (issue 31) on an SMS send's page, in headless Chromium
 * against a real listener: the characters smart encoding replaced, and a recipient held by quiet
 * hours as Scheduled with its due time on the account's clock. Each page is screenshot and
 * checked by axe-core, as in browser.test.ts.
 */
forEachDatabase((dialect) => {
  // Thursday 15 January 2026, 22:00 UTC: 23:00 in Paris, inside quiet hours of 21:00 to 08:00.
  const session = consoleSession(dialect, `${dialect}-preflight`, {
    clock: new ManualClock(Date.UTC(2026, 0, 15, 22)),
  });
  const { table, row, open } = session;
  /** A row's cell under the column headed `column`, found by its header, not its place. */
  const cell = async (of: Locator, rowText: string, column: string) => {
    const columns = await of.getByRole('columnheader').allInnerTexts();
    assert.ok(columns.includes(column), `a ${column} column in ${columns.join(', ')}`);
    return row(of, rowText).getByRole('cell').nth(columns.indexOf(column));
  };
  const cellText = async (of: Locator, rowText: string, column: string) =>
    (await cell(of, rowText, column)).innerText();

  it('signs in', () => session.signIn());

  it("shows how many characters a new account's smart encoding replaced", async () => {
    assert.equal((await session.alice.get('/account')).json().smartEncoding, true, 'on for an account made now');
    // Two curly apostrophes, each with a GSM-7 form: one GSM-7 part, not a UCS-2 one.
    const queueId = await session.alice.accept('/sms/single', {
      senderName: 'HERALD',
      recipient: '919812345678',
      body: 'Don\u2019t miss Ada\u2019s sale',
    });
    await session.api.drain();
    const [sent] = (await session.alice.get(`/sms/${queueId}`)).json().recipients;
    assert.deepEqual([sent.status, sent.encoding, sent.replacedCharacters], ['Delivered', 'GSM-7', 2]);

    await open(`/sms/${queueId}`, 'SMS send');
    const recipients = table('Recipients');
    await row(recipients, '919812345678').filter({ hasText: 'Delivered' }).waitFor();
    assert.equal(
      await cellText(recipients, '919812345678', 'Encoding'),
      'GSM-7, 2 characters replaced by smart encoding',
    );
    // The text as the request gave it, not as it went.
    const message = session.page.getByRole('region', { name: 'Message' });
    assert.match(await message.innerText(), /Text\s+Don\u2019t miss Ada\u2019s sale/);
    await session.browser.look('smart-encoding');
  });

  it("shows a recipient held by quiet hours as Scheduled, due when they end, on the account's clock", async () => {
    // India's offset, not the browser's zone (UTC) nor Paris's: the due time is shown shifted to it.
    const settings = await session.api.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: bearer(session.alice.token),
      payload: {
        quietHours: { start: '21:00', end: '08:00' },
        timeZoneOffset: 'UTC+05:30~India Standard Time',
        locale: 'en-GB',
      },
    });
    assert.equal(settings.statusCode, 200, settings.body);
    const queueId = await session.alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'Spring sale',
      recipients: [{ mobileNo: '33612345678' }],
    });
    await session.api.drain();
    const [held] = (await session.alice.get(`/sms/${queueId}`)).json().recipients;
    assert.deepEqual(
      [held.status, held.reason, held.dueAt],
      ['Scheduled', 'quiet hours', '2026-01-16T07:00:00.000Z'],
      "08:00 in Paris, the number's zone",
    );

    await open(`/sms/${queueId}`, 'SMS send');
    await session.page.getByText('Times in UTC+05:30').waitFor();
    const recipients = table('Recipients');
    const status = await cellText(recipients, '33612345678', 'Status');
    // 07:00 UTC is 12:30 in India.
    assert.equal(status, 'Scheduled for 16 Jan 2026, 12:30:00');
    const due = (await cell(recipients, '33612345678', 'Status')).locator('time');
    assert.equal(await due.getAttribute('datetime'), '2026-01-16T07:00:00.000Z', 'the UTC instant for machines');
    assert.equal(await cellText(recipients, '33612345678', 'Reason or error'), 'quiet hours');
    // The send itself is under way: only this recipient waits.
    assert.match(await session.page.locator('dl.facts').first().innerText(), /Recipients by status\s+Scheduled 1/);
    await session.browser.look('quiet-hours');
  });
});
