import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, errorFields } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { base64, buildBatch, sandboxEmails } from './support.ts';

// Every validation case of POST /email/batch (issue 13), through HTTP: the status, the field
// paths, and nothing queued.
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  beforeEach(async () => {
    api = await startApiTest(dialect);
    alice = await api.client();
  });
  afterEach(() => api.close());

  const refused = async (body: unknown, status: number, fields: string[]) => {
    const response = await alice.post('/email/batch', body);
    assert.equal(response.statusCode, status, response.body);
    const answer = response.json();
    assert.equal(answer.status, 'Failure');
    assert.deepEqual(errorFields(response), fields, response.body);
    return answer;
  };

  it('refuses an empty body, a missing sendingDetails, senderFrom or subject with 400 naming the field', async () => {
    await refused({}, 400, ['sendingDetails']);
    await refused({ recipients: [{ to: 'ada@example.com' }] }, 400, ['sendingDetails']);
    const { senderFrom: _, ...noSender } = buildBatch().sendingDetails;
    await refused({ sendingDetails: noSender, recipients: [{ to: 'ada@example.com' }] }, 400, [
      'sendingDetails.senderFrom',
    ]);
    const { subject: __, ...noSubject } = buildBatch().sendingDetails;
    await refused({ sendingDetails: noSubject, recipients: [{ to: 'ada@example.com' }] }, 400, [
      'sendingDetails.subject',
    ]);
    await refused(buildBatch({ subject: '   ' }), 400, ['sendingDetails.subject']);
  });

  it(
    'checks senderFrom and replyTo: addresses, displayName a string, the domain the service’s or the account’s ' +
      '(422)',
    async () => {
      await refused(buildBatch({ senderFrom: { email: 'not an address', displayName: 'X' } }), 400, [
        'sendingDetails.senderFrom.email',
      ]);
      await refused(buildBatch({ senderFrom: { email: 'news@mail.localhost', displayName: 7 } }), 400, [
        'sendingDetails.senderFrom.displayName',
      ]);
      await refused(buildBatch({ replyTo: { email: 'reply@', displayName: 'Help' } }), 400, [
        'sendingDetails.replyTo.email',
      ]);
      const foreign = await refused(
        buildBatch({ senderFrom: { email: 'news@shop.example', displayName: 'Shop' } }),
        422,
        ['sendingDetails.senderFrom.email'],
      );
      assert.match(foreign.errors[0].message, /shop\.example/);
      // Once the operator adds the domain for the account, it may send from it; another account still may not.
      const added = await api.t.app.inject({
        method: 'POST',
        url: `/admin/accounts/${alice.account.row.id}/sender-domains`,
        headers: bearer(ADMIN_TOKEN),
        payload: { domain: 'shop.example' },
      });
      assert.equal(added.statusCode, 201, added.body);
      const accepted = await alice.post(
        '/email/batch',
        buildBatch({
          senderFrom: { email: 'News@Shop.Example', displayName: 'Shop' },
          replyTo: { email: 'help@elsewhere.example', displayName: 'Help' },
        }),
      );
      assert.equal(accepted.statusCode, 202, accepted.body);
      const bob = await api.client();
      const bobs = await bob.post(
        '/email/batch',
        buildBatch({ senderFrom: { email: 'news@shop.example', displayName: 'Shop' } }),
      );
      assert.equal(bobs.statusCode, 422);
    },
  );

  it('takes exactly one of emailBody (Base64 of UTF-8 HTML) and emailCampaignId (the account’s)', async () => {
    await refused(buildBatch({ emailCampaignId: '5b0d7f5e-1c52-4d8e-9a51-2f7a3c1e9b40' }), 400, [
      'sendingDetails.emailBody',
    ]);
    const { emailBody: _, ...neither } = buildBatch().sendingDetails;
    await refused({ sendingDetails: neither, recipients: [{ to: 'ada@example.com' }] }, 400, [
      'sendingDetails.emailBody',
    ]);
    await refused(buildBatch({ emailBody: '<p>not Base64</p>' }), 400, ['sendingDetails.emailBody']);
    await refused(buildBatch({ emailBody: Buffer.from([0x3c, 0x70, 0xc3, 0x28]).toString('base64') }), 400, [
      'sendingDetails.emailBody',
    ]);
    await refused(buildBatch({ emailBody: base64('<p>a\u0000b</p>') }), 400, ['sendingDetails.emailBody']);
    await refused(buildBatch({ emailBody: base64('  \n ') }), 400, ['sendingDetails.emailBody']);
    await refused(buildBatch({ emailBody: undefined, emailCampaignId: '5b0d7f5e-1c52-4d8e-9a51-2f7a3c1e9b40' }), 422, [
      'sendingDetails.emailCampaignId',
    ]);
    const bob = await api.client();
    const hers = (await bob.post('/email/campaigns', { name: 'Bob’s', html: '<p>hi</p>' })).json().emailCampaignId;
    await refused(buildBatch({ emailBody: undefined, emailCampaignId: hers }), 422, ['sendingDetails.emailCampaignId']);
  });

  it(
    'needs recipients or lists, at most 1000 recipients, valid ' + 'addresses and tags, and the account’s lists',
    async () => {
      await refused(buildBatch({}, { recipients: undefined }), 400, ['recipients']);
      await refused(buildBatch({ listId: [] }, { recipients: [] }), 400, ['recipients']);
      const many = Array.from({ length: 1001 }, (_, i) => ({ to: `r${i}@example.com` }));
      await refused(buildBatch({}, { recipients: many }), 400, ['recipients']);
      await refused(
        buildBatch({}, { recipients: [{ to: 'ada@example.com' }, { to: 'bücher@example.com' }, { to: '' }] }),
        400,
        ['recipients[1].to', 'recipients[2].to'],
      );
      await refused(
        buildBatch(
          {},
          {
            recipients: [
              { to: 'ada@example.com', personalizationSubstitutionTags: [{ tagName: 'firstName', tagValue: 'Ada' }] },
            ],
          },
        ),
        400,
        ['recipients[0].personalizationSubstitutionTags[0].tagName'],
      );
      await refused(buildBatch({ listId: ['5b0d7f5e-1c52-4d8e-9a51-2f7a3c1e9b40'] }), 422, ['sendingDetails.listId']);
      const bob = await api.client();
      await refused(buildBatch({ listId: [await bob.createList('Bob’s')] }), 422, ['sendingDetails.listId']);
      await refused(buildBatch({ listId: ['not-a-uuid'] }), 400, ['sendingDetails.listId[0]']);
    },
  );

  it('checks webHookUrl, scheduleDateTime, unknown fields and control characters', async () => {
    await refused(buildBatch({ webHookUrl: 'ftp://example.com/hooks' }), 400, ['sendingDetails.webHookUrl']);
    await refused(buildBatch({ scheduleDateTime: 'tomorrow' }), 400, ['sendingDetails.scheduleDateTime']);
    await refused(buildBatch({ webhookUrl: 'https://example.com/hooks' }), 400, ['sendingDetails.webhookUrl']);
    await refused(buildBatch({ subject: 'a\u0000b' }), 400, ['sendingDetails.subject']);
    // Nested past the limit: refused at once, before any parser spends seconds (minutes at 2 MB) on it.
    const deep = (levels: number) => Buffer.from(`<p>Hi</p>${'<ul><li>'.repeat(levels)}deep`).toString('base64');
    const started = performance.now();
    const nested = await refused(buildBatch({ emailBody: deep(200_000) }), 400, ['sendingDetails.emailBody']);
    // A 1.6 MB body through the app: 2 to 4.2 s on a loaded machine. Parsed, it took minutes.
    assert.ok(performance.now() - started < 20_000, `${Math.round(performance.now() - started)} ms`);
    assert.match(nested.errors[0].message, /nests elements more than 1000 deep/);
    const shallow = await alice.post('/email/batch?dryRun=true', buildBatch({ emailBody: deep(400) }));
    assert.equal(shallow.statusCode, 200, shallow.body);
    // Tags are filled per recipient: a text may use them 200 times.
    const tagged = (uses: number) => Buffer.from(`<p>Hi${' [a]'.repeat(uses)}</p>`).toString('base64');
    const many = await refused(buildBatch({ emailBody: tagged(201) }), 400, ['sendingDetails.emailBody']);
    assert.match(many.errors[0].message, /uses tags more than 200 times/);
    await refused(buildBatch({ subject: '[a]'.repeat(201) }), 400, ['sendingDetails.subject']);
    assert.equal(
      (await alice.post('/email/batch?dryRun=true', buildBatch({ subject: '[a]'.repeat(200) }))).statusCode,
      200,
    );
    // Brackets in comments (Outlook's conditionals), style and script are no tags.
    const mjml = Buffer.from(
      `<style>a[x-apple-data-detectors]{color:inherit}</style>${'<!--[if mso | IE]><table><![endif]-->'.repeat(300)}` +
        '<p>Hi [firstName]</p>',
    ).toString('base64');
    const newsletter = await alice.post('/email/batch?dryRun=true', buildBatch({ emailBody: mjml }));
    assert.equal(newsletter.statusCode, 200, newsletter.body);
    const unclosed = Buffer.from(`${'<!--'.repeat(400_000)}`).toString('base64');
    const begun = performance.now();
    await refused(buildBatch({ emailBody: unclosed }), 400, ['sendingDetails.emailBody']).catch(() => undefined);
    // Likewise 1.6 MB: read from each opening again, 400,000 of them would take minutes.
    assert.ok(performance.now() - begun < 20_000, 'unclosed comments read in one pass');
    const enough = await alice.post('/email/batch?dryRun=true', buildBatch({ emailBody: tagged(200) }));
    assert.equal(enough.statusCode, 200, enough.body);
    await refused(buildBatch({}, { recipients: [{ to: 'ada@example.com', extra: 1 }] }), 400, ['recipients[0].extra']);
    const privateHooks = await startApiTest(dialect, { env: { WEBHOOK_ALLOW_PRIVATE: 'false' } });
    try {
      const client = await privateHooks.client();
      const response = await client.post('/email/batch', buildBatch({ webHookUrl: 'http://127.0.0.1:9/hooks' }));
      assert.equal(response.statusCode, 422);
      assert.deepEqual(errorFields(response), ['sendingDetails.webHookUrl']);
    } finally {
      await privateHooks.close();
    }
  });

  it('lists every problem of a request in one answer, and queues nothing for any of them', async () => {
    await refused(buildBatch({ subject: '', emailBody: '***' }, { recipients: [{ to: 'x' }] }), 400, [
      'sendingDetails.subject',
      'sendingDetails.emailBody',
      'recipients[0].to',
    ]);
    await api.drain();
    assert.deepEqual(await sandboxEmails(alice), []);
    const sends = await api.t.ctx.db.selectFrom('sends').select('id').execute();
    assert.deepEqual(sends, []);
  });
});
