import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { Migrator, sql } from 'kysely';
import { migrateToLatest } from '../../src/db/database.ts';
import { migrations } from '../../src/db/migrations/index.ts';
import { measure } from '../../src/sms/segments.ts';
import { SMART_ENCODING_TABLE, smartEncoded } from '../../src/sms/smart-encoding.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { createTestDatabase, forEachDatabase } from '../support/databases.ts';

// Smart encoding (src/sms/smart-encoding.ts): look-alikes in GSM-7 forms, all or nothing.

describe('smart encoding', () => {
  for (const [char, form] of SMART_ENCODING_TABLE) {
    const name = `U+${char.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
    it(`turns ${name} into ${JSON.stringify(form)}, a text of GSM-7 once it is`, () => {
      assert.equal(measure(`a${char}b`).encoding, 'UCS-2', `${name} alone makes the text UCS-2`);
      const encoded = smartEncoded(`a${char}b`);
      assert.deepEqual(encoded, { text: `a${form}b`, replacedCharacters: 1 });
      assert.equal(measure(encoded.text).encoding, 'GSM-7');
    });
  }

  it('keeps a 160-character text with a curly apostrophe in one GSM-7 part, not three UCS-2 ones', () => {
    const text = `Don\u2019t miss it: ${'x'.repeat(160 - 'Don’t miss it: '.length)}`;
    assert.equal(text.length, 160);
    assert.deepEqual([measure(text).encoding, measure(text).parts], ['UCS-2', 3]);
    const encoded = smartEncoded(text);
    assert.deepEqual([measure(encoded.text).encoding, measure(encoded.text).parts], ['GSM-7', 1]);
  });

  it('leaves a text unchanged, quotes as written, when a character has no GSM-7 form', () => {
    for (const text of ['\u201CHi\u201D \u{1F600}', 'Привет \u2014 \u2019', '\u2019\u4E2D']) {
      assert.deepEqual(smartEncoded(text), { text, replacedCharacters: 0 });
    }
  });

  it('leaves a text as written when its GSM-7 form would take more parts: sixty ellipses', () => {
    const text = '\u2026'.repeat(60);
    assert.equal(measure(text).parts, 1);
    assert.deepEqual(smartEncoded(text), { text, replacedCharacters: 0 });
  });

  it('counts every character replaced, removed ones too, and leaves a GSM-7 text alone', () => {
    assert.deepEqual(smartEncoded('\u201CSale\u201D\u2026 now\u200B!'), {
      text: '"Sale"... now!',
      replacedCharacters: 4,
    });
    assert.deepEqual(smartEncoded('Plain [text] €5 {ok}'), { text: 'Plain [text] €5 {ok}', replacedCharacters: 0 });
  });
});

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  beforeEach(async () => {
    api = await startApiTest(dialect);
    alice = await api.client();
  });
  afterEach(() => api.close());

  // 160 characters with one curly apostrophe: three UCS-2 parts as written, one GSM-7 part smartly encoded.
  const TEXT = `Don\u2019t miss it: ${'x'.repeat(144)}`;
  const patch = (payload: object) =>
    api.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: { authorization: `Bearer ${alice.token}` },
      payload,
    });
  const sent = async (body: object) => {
    const queueId = await alice.accept('/sms/single', { recipient: '919812345678', senderName: 'HERALD', ...body });
    await api.drain();
    const [recipient] = (await alice.get(`/sms/${queueId}`)).json().recipients;
    const parts = (await alice.get('/sandbox/sms'))
      .json()
      .messages.filter((m: { queueId: string }) => m.queueId === queueId);
    return { recipient, parts };
  };

  it("sends a new account's look-alikes in GSM-7 and counts them; off, the text goes as written", async () => {
    assert.equal((await alice.get('/account')).json().smartEncoding, true, 'on for an account made now');
    const on = await sent({ body: TEXT });
    assert.deepEqual([on.recipient.encoding, on.recipient.parts, on.recipient.replacedCharacters], ['GSM-7', 1, 1]);
    assert.deepEqual(
      on.parts.map((p: { text: string }) => p.text),
      [TEXT.replace('\u2019', "'")],
    );
    const off = await patch({ smartEncoding: false });
    assert.equal(off.json().smartEncoding, false, off.body);
    const asWritten = await sent({ body: TEXT });
    assert.deepEqual(
      [asWritten.recipient.encoding, asWritten.recipient.parts, asWritten.recipient.replacedCharacters],
      ['UCS-2', 3, 0],
    );
  });

  it("applies to what a tag brings, all or nothing, and to Verify's codes", async () => {
    const tagged = await sent({
      body: 'Hi [name]',
      personalizationSubstitutionTags: [{ tagName: '[name]', tagValue: 'Zo\u00EB \u2014 \u201Cthe boss\u201D' }],
    });
    assert.deepEqual([tagged.recipient.encoding, tagged.recipient.replacedCharacters], ['UCS-2', 0], 'ë has no form');
    const tagged2 = await sent({
      body: 'Hi [name]',
      personalizationSubstitutionTags: [{ tagName: '[name]', tagValue: 'Zoe \u2014 \u201Cthe boss\u201D' }],
    });
    assert.deepEqual([tagged2.recipient.encoding, tagged2.recipient.replacedCharacters], ['GSM-7', 3]);
    assert.equal(tagged2.parts[0].text, 'Hi Zoe - "the boss"');
    const verification = await alice.post('/verify', { to: '919812300001', template: 'Your code\u2019s [code]' });
    assert.equal(verification.statusCode, 201, verification.body);
    await api.drain();
    const [code] = (await alice.get('/sandbox/sms?recipient=919812300001')).json().messages;
    assert.match(code.text, /^Your code's \d{6}$/);
    assert.equal(code.encoding, 'GSM-7');
  });

  it('leaves it off for the accounts there were before the upgrade', async () => {
    const database = await createTestDatabase(dialect, { empty: true });
    try {
      const migrator = new Migrator({ db: database.db, provider: { getMigrations: async () => migrations } });
      assert.ifError((await migrator.migrateTo('0032_verify')).error);
      await sql`insert into accounts (id, user_name, user_name_key, password_hash, private_token_hash,
                                      time_zone_offset, locale, created_at, updated_at)
                values ('a', 'old@example.com', 'old@example.com', 'x', 'y', '+00:00', 'en', 0, 0)`.execute(
        database.db,
      );
      await migrateToLatest(database);
      await sql`insert into accounts (id, user_name, user_name_key, password_hash, private_token_hash,
                                      time_zone_offset, locale, created_at, updated_at)
                values ('b', 'new@example.com', 'new@example.com', 'x', 'z', '+00:00', 'en', 0, 0)`.execute(
        database.db,
      );
      const rows = await database.db.selectFrom('accounts').select(['id', 'smart_encoding']).orderBy('id').execute();
      assert.deepEqual(
        rows.map((row) => [row.id, Boolean(row.smart_encoding)]),
        [
          ['a', false],
          ['b', true],
        ],
      );
    } finally {
      await database.close();
    }
  });
});
