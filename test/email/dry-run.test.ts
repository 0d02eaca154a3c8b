import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { UNSUBSCRIBE_STAND_IN } from '../../src/email/dry-run.ts';
import { bearer } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';
import { rowCounts } from '../support/storage.ts';
import { base64, buildBatch, parsedEmails } from './support.ts';

// `?dryRun=true` on /email/batch (ARCHITECTURE.md, "Preflight").

forEachDatabase((dialect) => {
  describe('email dry run', () => {
    let api: ApiTest;
    let alice: ApiClient;
    beforeEach(async () => {
      api = await startApiTest(dialect);
      alice = await api.client();
    });
    afterEach(() => api.close());

    const dryRun = (client: ApiClient, body: object, query = '') =>
      api.t.app.inject({
        method: 'POST',
        url: `/email/batch?dryRun=true${query}`,
        headers: { ...bearer(client.token), 'idempotency-key': 'dry' },
        payload: body,
      });

    /** Ann and Ben opted in, Cal without consent, Dee suppressed; all on one list. */
    const seed = async () => {
      const first = await alice.createProperty('firstName');
      const listId = await alice.createList('Readers');
      const contact = (email: string, optIn: boolean, name: string) => ({
        email,
        emailOptIn: optIn,
        propertyfields: [{ propertyid: first, propertyvalue: name }],
      });
      await alice.upsert(
        [
          contact('ann@example.com', true, 'Ann'),
          contact('ben@example.com', true, 'Ben'),
          contact('cal@example.com', false, 'Cal'),
          contact('dee@example.com', true, 'Dee'),
        ],
        { listId },
      );
      const suppressed = await alice.post('/email/suppressions', { email: 'dee@example.com' });
      assert.equal(suppressed.statusCode, 201, suppressed.body);
      return listId;
    };
    const batch = (listId: string) =>
      buildBatch(
        { subject: 'Hello [firstName]', emailBody: base64('<p>Dear [firstName], welcome.</p>'), listId: [listId] },
        {
          recipients: [
            { to: 'zed@example.com', personalizationSubstitutionTags: [{ tagName: '[firstName]', tagValue: 'Zed' }] },
            { to: 'ann@example.com' },
            { to: 'Zed@example.com' },
          ],
        },
      );

    it('counts and previews a batch as the send then goes, and writes nothing', async () => {
      const listId = await seed();
      const before = await rowCounts(api, dialect);
      const answer = await dryRun(alice, batch(listId));
      assert.equal(answer.statusCode, 200, answer.body);
      const run = answer.json();
      assert.deepEqual(run.recipients, {
        total: 7,
        willSend: 3,
        notSent: { noConsent: 1, suppressed: 1, duplicate: 2 },
      });
      assert.deepEqual(run.estimatedCost, []);
      assert.equal(run.parts, undefined, 'parts and encodings are SMS only');
      assert.deepEqual(
        run.preview.map((p: { email: string; subject: string }) => [p.email, p.subject]),
        [
          ['zed@example.com', 'Hello Zed'],
          ['ann@example.com', 'Hello Ann'],
          ['ben@example.com', 'Hello Ben'],
        ],
      );
      await api.drain();
      assert.deepEqual(await rowCounts(api, dialect), before, 'nothing written');

      const sent = await alice.post('/email/batch', batch(listId));
      assert.equal(sent.statusCode, 202, sent.body);
      await api.drain();
      const mails = await parsedEmails(alice);
      assert.deepEqual([...mails.keys()].sort(), ['ann@example.com', 'ben@example.com', 'zed@example.com']);
      for (const preview of run.preview as Array<{ email: string; subject: string; text: string }>) {
        const mail = mails.get(preview.email)!;
        assert.equal(mail.subject, preview.subject);
        const text = mail.text!.replace(/(\/t\/u\/)[^\s\]]+/, `$1${UNSUBSCRIBE_STAND_IN}`);
        assert.equal(text.trim(), preview.text.trim(), 'the text alternative, but for its unsubscribe link');
      }
    });

    it('answers bad input as the send does, limits the preview, and refuses another account’s list', async () => {
      const listId = await seed();
      const bad = await dryRun(alice, { ...batch(listId), sendingDetails: { subject: 'x', listId: [listId] } });
      assert.equal(bad.statusCode, 400, bad.body);
      const one = await dryRun(alice, batch(listId), '&preview=1');
      assert.equal(one.json().preview.length, 1);
      const bob = await api.client();
      assert.equal((await dryRun(bob, batch(listId))).statusCode, 422);
      const own = await dryRun(bob, buildBatch({}, { recipients: [{ to: 'ann@example.com' }] }));
      assert.deepEqual(own.json().recipients, {
        total: 1,
        willSend: 1,
        notSent: { noConsent: 0, suppressed: 0, duplicate: 0 },
      });
    });
  });
});
