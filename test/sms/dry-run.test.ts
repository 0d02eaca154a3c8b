import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { dryRunAudience } from '../../src/messaging/dry-run.ts';
import { ADMIN_TOKEN, bearer, errorFields } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';
import { rowCounts } from '../support/storage.ts';

// `?dryRun=true` on /sms/single and /sms/batch (ARCHITECTURE.md, "Preflight"): counted and
// rendered by the send's own rules, and nothing written.

interface Preview {
  recipient: string;
  text: string;
  parts: number;
  encoding: string;
  replacedCharacters: number;
}

forEachDatabase((dialect) => {
  describe('SMS dry run', () => {
    let api: ApiTest;
    let alice: ApiClient;
    beforeEach(async () => {
      api = await startApiTest(dialect);
      alice = await api.client();
    });
    afterEach(() => api.close());

    const dryRun = (client: ApiClient, path: string, body: object, query = '', headers: object = {}) =>
      api.t.app.inject({
        method: 'POST',
        url: `${path}?dryRun=true${query}`,
        headers: { ...bearer(client.token), ...headers },
        payload: body,
      });

    /**
     * A list of five contacts: A and B (two contacts) opted in with a first name, C without
     * consent, D suppressed; Zoë's ë has no GSM-7 form, so her text stays UCS-2.
     */
    const numbers = { A: '919812300001', B: '919812300002', C: '919812300003', D: '919812300004', E: '919812300005' };
    const seed = async (client: ApiClient) => {
      const first = await client.createProperty('firstName');
      const listId = await client.createList('Customers');
      const contact = (n: keyof typeof numbers, optIn: boolean, name: string) => ({
        mobileCountryCode: '91',
        mobileNumber: numbers[n].slice(2),
        mobileOptIn: optIn,
        propertyfields: [{ propertyid: first, propertyvalue: name }],
      });
      await client.upsert(
        [contact('A', true, 'Zoë'), contact('B', true, 'Bob'), contact('C', false, 'Cy'), contact('D', true, 'Di')],
        { listId },
      );
      // A second contact with B's number (by email, so the batch makes a new one), newer: its name fills the tags.
      await client.upsert([{ ...contact('B', true, 'Bea'), email: 'bea@example.com' }], { listId });
      const suppressed = await client.post('/sms/suppressions', { number: numbers.D, reason: 'replied STOP' });
      assert.equal(suppressed.statusCode, 201, suppressed.body);
      return listId;
    };
    const batch = (listId: string) => ({
      senderName: 'HERALD',
      body: 'Hi [firstName], it\u2019s on',
      listId: [listId],
      recipients: [{ mobileNo: numbers.A }, { mobileNo: numbers.E }, { mobileNo: numbers.E }],
    });

    it('counts and previews a batch as the send then goes: recipients, parts, encodings, texts', async () => {
      const listId = await seed(alice);
      const answer = await dryRun(alice, '/sms/batch', batch(listId));
      assert.equal(answer.statusCode, 200, answer.body);
      const run = answer.json();
      assert.deepEqual(run.recipients, {
        total: 8,
        willSend: 3,
        notSent: { noConsent: 1, suppressed: 1, duplicate: 3 },
      });
      assert.deepEqual(
        run.preview.map((p: Preview) => [p.recipient, p.text, p.parts, p.encoding, p.replacedCharacters]),
        [
          [numbers.A, 'Hi Zoë, it\u2019s on', 1, 'UCS-2', 0],
          [numbers.E, "Hi , it's on", 1, 'GSM-7', 1],
          [numbers.B, "Hi Bea, it's on", 1, 'GSM-7', 1],
        ],
      );
      assert.deepEqual([run.parts, run.encoding, run.estimatedCost], [3, { 'GSM-7': 2, 'UCS-2': 1 }, []]);

      const queueId = await alice.accept('/sms/batch', batch(listId));
      await api.drain();
      const read = (await alice.get(`/sms/${queueId}`)).json();
      const sent = read.recipients.filter((r: { status: string }) => r.status !== 'NotSent');
      assert.deepEqual(
        sent.map((r: Preview & { mobile?: string }) => [r.recipient ?? r.mobile, r.parts, r.encoding]),
        run.preview.map((p: Preview) => [p.recipient, p.parts, p.encoding]),
        'the send reached the recipients the dry run named, in its order, with its parts and encodings',
      );
      assert.equal(read.recipients.length - sent.length, run.recipients.notSent.noConsent + 1);
      const texts = (await alice.get('/sandbox/sms')).json().messages.map((m: { text: string }) => m.text);
      assert.deepEqual(texts.sort(), run.preview.map((p: Preview) => p.text).sort());
    });

    it('counts a contact once for each list of the send that holds it, All contacts among them', async () => {
      const listId = await seed(alice);
      const [everyone] = (await alice.get('/lists')).json().lists;
      const run = (await dryRun(alice, '/sms/batch', { ...batch(listId), listId: [everyone.listId, listId] })).json();
      // 3 given, 5 contacts in All contacts and the same 5 in Customers: only the 5 more are new duplicates.
      assert.deepEqual(run.recipients, {
        total: 13,
        willSend: 3,
        notSent: { noConsent: 1, suppressed: 1, duplicate: 8 },
      });
    });

    it('counts and orders the same whatever the size of its ranges', async () => {
      const listId = await seed(alice);
      const [everyone] = (await alice.get('/lists')).json().lists;
      const run = async (rangeSize: number) => {
        const seen: string[] = [];
        const count = await dryRunAudience(
          api.t.ctx.database.reads,
          dialect,
          {
            channel: 'sms',
            accountId: alice.account.row.id,
            listIds: [everyone.listId, listId],
            erasureKey: Buffer.alloc(32),
            recipients: [{ address: numbers.E, tags: {} }],
            given: 2,
          },
          (recipients) => seen.push(...recipients.map((r) => r.address)),
          rangeSize,
        );
        return { count, seen };
      };
      const whole = await run(1000);
      assert.deepEqual(whole.seen, [numbers.E, numbers.A, numbers.B]);
      for (const rangeSize of [1, 2, 3]) assert.deepEqual(await run(rangeSize), whole, `ranges of ${rangeSize}`);
    });

    it('writes nothing: no send, job, link, webhook, usage or Idempotency-Key record', async () => {
      const listId = await seed(alice);
      const page = await alice.post('/landing-pages', { name: 'Offer', url: 'https://example.com/offer' });
      assert.equal(page.statusCode, 201, page.body);
      const before = await rowCounts(api, dialect);
      const body = {
        ...batch(listId),
        landingPageId: page.json().landingPageId,
        webHookUrl: 'http://127.0.0.1:9/sms',
      };
      const answer = await dryRun(alice, '/sms/batch', body, '', { 'idempotency-key': 'dry-1' });
      assert.equal(answer.statusCode, 200, answer.body);
      const [first] = answer.json().preview;
      assert.match(first.text, /^Hi Zoë, it’s on http:\/\/\S+\/l\/0{8}$/, 'the link a stand-in of its length');
      await api.drain();
      assert.deepEqual(await rowCounts(api, dialect), before);
      // The key was not taken: the real send with it is accepted.
      const real = await api.t.app.inject({
        method: 'POST',
        url: '/sms/batch',
        headers: { ...bearer(alice.token), 'idempotency-key': 'dry-1' },
        payload: body,
      });
      assert.equal(real.statusCode, 202, real.body);
    });

    it('prices the parts by the route each number would take', async () => {
      const listId = await seed(alice);
      const routes = await api.t.app.inject({
        method: 'PUT',
        url: '/admin/sms-routes',
        headers: bearer(ADMIN_TOKEN),
        payload: {
          routes: [
            { prefix: '9198123000', smsc: ['default'], pricePerPart: '0.0075', currency: 'EUR' },
            { prefix: '919812300005', smsc: ['default'], pricePerPart: '0.01', currency: 'USD' },
          ],
        },
      });
      assert.equal(routes.statusCode, 200, routes.body);
      const long = { ...batch(listId), body: `${'x'.repeat(150)} [firstName]` };
      const run = (await dryRun(alice, '/sms/batch', long)).json();
      // A: 150 + "Zoë" in UCS-2, 3 parts; B: "Bea", 2 GSM-7 parts; E (USD): 151 characters, 1 part.
      assert.deepEqual(
        run.preview.map((p: Preview) => p.parts),
        [3, 1, 1],
      );
      assert.equal(run.parts, 5);
      assert.deepEqual(run.estimatedCost, [
        { amount: '0.03', currency: 'EUR' },
        { amount: '0.01', currency: 'USD' },
      ]);
    });

    it('estimates exactly a cost beyond 2^53 micro-units: 400 messages of 255 parts at the highest price', async () => {
      const table = { routes: [{ prefix: '', smsc: ['default'], pricePerPart: '99999.999999', currency: 'EUR' }] };
      const routes = await api.t.app.inject({
        method: 'PUT',
        url: '/admin/sms-routes',
        headers: bearer(ADMIN_TOKEN),
        payload: table,
      });
      assert.equal(routes.statusCode, 200, routes.body);
      const recipients = Array.from({ length: 400 }, (_, i) => ({ mobileNo: String(919812400000 + i) }));
      const run = (
        await dryRun(alice, '/sms/batch', { senderName: 'HERALD', body: 'x'.repeat(39_000), recipients })
      ).json();
      assert.equal(run.parts, 400 * 255);
      // 102,000 × 99,999,999,999 micro-units = 10,199,999,999,898,000.
      assert.deepEqual(run.estimatedCost, [{ amount: '10199999999.898', currency: 'EUR' }]);
    });

    it('bills no part to a number no route takes once a connection is added: its send fails it', async () => {
      const admin = (method: 'POST' | 'PUT', url: string, payload: object) =>
        api.t.app.inject({ method, url, headers: bearer(ADMIN_TOKEN), payload });
      assert.equal((await admin('POST', '/admin/smsc', { name: 'uk', url: 'sandbox:' })).statusCode, 201);
      const routes = { routes: [{ prefix: '44', smsc: ['uk'], pricePerPart: '0.01', currency: 'GBP' }] };
      assert.equal((await admin('PUT', '/admin/sms-routes', routes)).statusCode, 200);
      const body = {
        senderName: 'HERALD',
        body: 'Hello',
        recipients: [{ mobileNo: '919812345601' }, { mobileNo: '447400123456' }],
      };
      const run = (await dryRun(alice, '/sms/batch', body)).json();
      assert.deepEqual([run.parts, run.estimatedCost], [1, [{ amount: '0.01', currency: 'GBP' }]]);
    });

    it('bills no part of a message its tags make longer than 255 parts: its send fails it', async () => {
      // 39,000 GSM-7 characters are 255 parts; A's tag adds 1,000 more, 262 parts.
      const long = { tagName: '[a]', tagValue: 'y'.repeat(1000) };
      const run = await dryRun(alice, '/sms/batch', {
        senderName: 'HERALD',
        body: `${'x'.repeat(39_000)}[a]`,
        recipients: [{ mobileNo: numbers.A, personalizationSubstitutionTags: [long] }, { mobileNo: numbers.B }],
      });
      assert.equal(run.statusCode, 200, run.body);
      assert.deepEqual(
        run.json().preview.map((p: Preview) => p.parts),
        [262, 255],
      );
      assert.equal(run.json().parts, 255, 'B’s parts alone');
    });

    it('bills no part of a message its tags leave empty: its send fails it', async () => {
      const run = await dryRun(alice, '/sms/batch', {
        senderName: 'HERALD',
        body: '[a]',
        recipients: [
          { mobileNo: numbers.A, personalizationSubstitutionTags: [{ tagName: '[a]', tagValue: 'hi' }] },
          { mobileNo: numbers.B },
        ],
      });
      assert.equal(run.statusCode, 200, run.body);
      assert.equal(run.json().parts, 1, 'A’s part alone');
    });

    it('answers bad input as the send does, and a single to a suppressed number 422', async () => {
      const listId = await seed(alice);
      const bad = await dryRun(alice, '/sms/batch', { ...batch(listId), senderName: '' });
      assert.equal(bad.statusCode, 400, bad.body);
      const single = await dryRun(alice, '/sms/single', { senderName: 'HERALD', body: 'x', recipient: numbers.D });
      assert.equal(single.statusCode, 422, single.body);
      assert.deepEqual(errorFields(single), ['recipient']);
      const ok = await dryRun(alice, '/sms/single', { senderName: 'HERALD', body: 'Code 1234', recipient: numbers.E });
      assert.equal(ok.statusCode, 200, ok.body);
      assert.deepEqual(ok.json().recipients, {
        total: 1,
        willSend: 1,
        notSent: { noConsent: 0, suppressed: 0, duplicate: 0 },
      });
      for (const query of ['&preview=0', '&preview=101', '&preview=x']) {
        const answer = await dryRun(alice, '/sms/batch', batch(listId), query);
        assert.equal(answer.statusCode, 400, `${query}: ${answer.body}`);
      }
      const two = await dryRun(alice, '/sms/batch', batch(listId), '&preview=2');
      assert.equal(two.json().preview.length, 2);
      const notDry = await api.t.app.inject({
        method: 'POST',
        url: '/sms/batch?dryRun=false',
        headers: bearer(alice.token),
        payload: batch(listId),
      });
      assert.equal(notDry.statusCode, 202, 'dryRun=false sends');
    });

    it("counts only the account's own contacts, and refuses another account's list", async () => {
      const listId = await seed(alice);
      const bob = await api.client();
      const theirs = await dryRun(bob, '/sms/batch', batch(listId));
      assert.equal(theirs.statusCode, 422, theirs.body);
      const [everyone] = (await bob.get('/lists')).json().lists;
      assert.equal(everyone.name, 'All contacts');
      const own = await dryRun(bob, '/sms/batch', {
        senderName: 'HERALD',
        body: 'Hi',
        listId: [everyone.listId],
        recipients: [{ mobileNo: numbers.A }],
      });
      assert.equal(own.statusCode, 200, own.body);
      assert.deepEqual(own.json().recipients, {
        total: 1,
        willSend: 1,
        notSent: { noConsent: 0, suppressed: 0, duplicate: 0 },
      });
    });
  });
});
