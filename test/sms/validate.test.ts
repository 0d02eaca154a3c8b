import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { createAccount } from '../../src/accounts/service.ts';
import { addSenderName } from '../../src/senders/names.ts';
import { createList } from '../../src/crm/setup.ts';
import { postLandingPage } from '../../src/links/landing-pages.ts';
import { addShortenerDomain } from '../../src/links/shortener.ts';
import { AppError, type FieldError } from '../../src/errors.ts';
import type { SmsDraft } from '../../src/sms/draft.ts';
import type { SmsBatchRequest, SmsSingleRequest } from '../../src/sms/schemas.ts';
import { MAX_PARTS } from '../../src/sms/segments.ts';
import { checkSmsRequest, prepareSms } from '../../src/sms/validate.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);
const INDIA = { timeZoneOffset: 'UTC+05:30~India Standard Time' };
const GB_MOBILE = '447911123456';
const LIST_A = '0b6c1c1e-8f4e-4c49-9a51-3f3d2c1b0a99';
const LIST_B = '6f1d2e3c-4b5a-4968-8776-5a4b3c2d1e0f';
const PAGE = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d';
const PUBLIC_URL = 'https://herald.example.com';
/** The service's own link: https://herald.example.com/l/ and an 8-character code, 32 characters. */
const LINK_LENGTH = `${PUBLIC_URL}/l/`.length + 8;

const single = (fields: Record<string, unknown> = {}) =>
  ({ recipient: GB_MOBILE, senderName: 'Acme', body: 'Your code is 1234', ...fields }) as SmsSingleRequest;
const batch = (fields: Record<string, unknown> = {}) =>
  ({ senderName: 'Acme', body: 'Hello [name]', ...fields }) as SmsBatchRequest;

const draftOf = (fields: Partial<SmsDraft>): SmsDraft => ({
  kind: 'single',
  senderName: 'Acme',
  body: 'Your code is 1234',
  isBodyEncrypted: false,
  tags: {},
  recipients: [{ mobile: GB_MOBILE, tags: {} }],
  listIds: [],
  scheduledAt: null,
  landingPageId: null,
  shortener: null,
  webhookUrl: null,
  ...fields,
});

const checkSingle = (fields: Record<string, unknown>, account = INDIA) =>
  checkSmsRequest('single', single(fields), account, NOW, PUBLIC_URL);
const checkBatch = (fields: Record<string, unknown>) => checkSmsRequest('batch', batch(fields), INDIA, NOW, PUBLIC_URL);

describe('checkSmsRequest', () => {
  it('turns a single SMS into its draft, every field carried over', () => {
    const { draft, errors } = checkSingle({
      isBodyEncrypted: true,
      personalizationSubstitutionTags: [
        { tagName: '[code]', tagValue: '1234' },
        { tagName: '[first name]', tagValue: 'Ann\nLee' },
      ],
      webHookUrl: 'https://hooks.example.com/sms',
    });
    assert.deepEqual(errors, []);
    assert.deepEqual(
      draft,
      draftOf({
        isBodyEncrypted: true,
        tags: { '[code]': '1234', '[first name]': 'Ann\nLee' },
        webhookUrl: 'https://hooks.example.com/sms',
        smartEncoding: false,
      }),
    );
  });

  describe('recipient and mobileNo: the country code and number, as a string of digits or a JSON whole number', () => {
    const valid: Array<[string, unknown, string]> = [
      ['a string of digits', GB_MOBILE, GB_MOBILE],
      ['a JSON whole number', 447911123456, GB_MOBILE],
      ['with the national trunk prefix after the country code', '4407911123456', GB_MOBILE],
      ['a US number (FIXED_LINE_OR_MOBILE)', '12025550123', '12025550123'],
      ['a Canadian number, which shares +1', '16135550123', '16135550123'],
      ['a French mobile', 33612345678, '33612345678'],
    ];
    for (const [name, recipient, mobile] of valid) {
      it(`takes ${name}`, () => {
        const { draft, errors } = checkSingle({ recipient });
        assert.deepEqual(errors, []);
        assert.deepEqual(draft.recipients, [{ mobile, tags: {} }]);
      });
    }

    const invalid: Array<[string, unknown, RegExp]> = [
      ['a leading +', '+447911123456', /^must be digits only: leave out the \+$/],
      [
        'spaces',
        '44 7911 123456',
        /^must be the country code and number, digits only: no \+, spaces or other symbols$/,
      ],
      ['an empty string', '', /digits only/],
      ['a landline', '442079460123', /^is not a valid mobile number for country code \+44$/],
      ['no country code', '07911123456', /^is not a mobile number: give the country code, then the number/],
      ['a calling code no country has', '99912345678', /^is not a mobile number/],
      ['too many digits', '4479111234567890123', /^must be at most 18 digits$/],
      ['a fraction', 4.5, /^must be a whole number of at most 15 digits, or a string of digits$/],
      ['a negative number', -447911123456, /^must be a whole number/],
      ['a number past 2^53, whose digits JSON lost', 2 ** 60, /^must be a whole number/],
      ['true', true, /^must be the country code and number, digits only, as a string or a number$/],
      ['null', null, /as a string or a number/],
      ['an object', { number: GB_MOBILE }, /as a string or a number/],
    ];
    for (const [name, recipient, message] of invalid) {
      it(`refuses ${name}, by its field`, () => {
        const one = checkSingle({ recipient });
        assert.deepEqual(
          one.errors.map((e) => e.field),
          ['recipient'],
        );
        assert.match(one.errors[0].message, message);
        assert.deepEqual(one.draft.recipients, []);
        const many = checkBatch({ recipients: [{ mobileNo: GB_MOBILE }, { mobileNo: recipient }] });
        assert.deepEqual(
          many.errors.map((e) => e.field),
          ['recipients[1].mobileNo'],
        );
        assert.match(many.errors[0].message, message);
      });
    }
  });

  describe('senderName: 1 to 11 letters, digits or spaces with a letter, or 3 to 15 digits', () => {
    for (const senderName of ['Acme', 'A', 'My Shop 24', 'ABCDEFGHIJK', '123', '447911123456789']) {
      it(`takes ${JSON.stringify(senderName)}`, () => assert.deepEqual(checkSingle({ senderName }).errors, []));
    }
    for (const senderName of ['', '   ', 'ABCDEFGHIJKL', 'Acme!', 'Café', '12', '4479111234567890']) {
      it(`refuses ${JSON.stringify(senderName)}`, () => {
        assert.deepEqual(checkSingle({ senderName }).errors, [
          {
            field: 'senderName',
            message: 'must be 1 to 11 letters, digits or spaces with at least one letter, or 3 to 15 digits',
          },
        ]);
      });
    }
  });

  describe('body', () => {
    it('refuses a body that is empty or only white space', () => {
      for (const body of ['', ' \n\t '])
        assert.deepEqual(checkSingle({ body }).errors, [{ field: 'body', message: 'must not be empty' }]);
    });

    it('keeps the body as written, white space included', () => {
      assert.equal(checkSingle({ body: '  code 1234\n' }).draft.body, '  code 1234\n');
    });

    it(`takes ${MAX_PARTS} parts and refuses more`, () => {
      assert.deepEqual(checkSingle({ body: 'x'.repeat(MAX_PARTS * 153) }).errors, []);
      assert.deepEqual(checkSingle({ body: 'x'.repeat(MAX_PARTS * 153 + 1) }).errors, [
        { field: 'body', message: `takes ${MAX_PARTS + 1} SMS parts; a message has at most ${MAX_PARTS}` },
      ]);
    });
  });

  it('takes a body using tags up to 30 times and refuses more: each is filled per recipient', () => {
    const using = (uses: number) => `Hi${' [a]'.repeat(uses)}`;
    assert.deepEqual(checkSingle({ body: using(30) }).errors, []);
    assert.deepEqual(checkSingle({ body: using(31) }).errors, [
      { field: 'body', message: 'uses tags more than 30 times' },
    ]);
  });

  describe('personalizationSubstitutionTags: a tagName is [x], x 1 to 64 characters other than brackets', () => {
    for (const tagName of ['[name]', '[first name]', '[Prénom]', '[a]', `[${'x'.repeat(64)}]`]) {
      it(`takes ${tagName.length > 20 ? 'a name of 64 characters' : tagName}`, () => {
        const { draft, errors } = checkSingle({ personalizationSubstitutionTags: [{ tagName, tagValue: 'v' }] });
        assert.deepEqual(errors, []);
        assert.deepEqual(draft.tags, { [tagName]: 'v' });
      });
    }
    for (const tagName of ['name', '[]', '[a]b', 'a[b]', '[a[b]', '[a]b]', `[${'x'.repeat(65)}]`]) {
      it(`refuses ${tagName.length > 20 ? 'a name of 65 characters' : tagName}`, () => {
        assert.deepEqual(
          checkSingle({
            personalizationSubstitutionTags: [
              { tagName: '[ok]', tagValue: '' },
              { tagName, tagValue: 'v' },
            ],
          }).errors,
          [
            {
              field: 'personalizationSubstitutionTags[1].tagName',
              message:
                'must be a name in square brackets, like [firstName]: 1 to 64 characters, none of them a bracket',
            },
          ],
        );
      });
    }

    it('refuses a tagName given twice, pointing to the first, and takes an empty tagValue', () => {
      const tags = [
        { tagName: '[a]', tagValue: '' },
        { tagName: '[b]', tagValue: '2' },
        { tagName: '[a]', tagValue: '3' },
      ];
      const { draft, errors } = checkSingle({ personalizationSubstitutionTags: tags });
      assert.deepEqual(errors, [
        {
          field: 'personalizationSubstitutionTags[2].tagName',
          message: 'repeats the tagName of personalizationSubstitutionTags[0]',
        },
      ]);
      assert.deepEqual(draft.tags, { '[a]': '', '[b]': '2' });
    });

    it("checks each batch recipient's tags by its path", () => {
      const { errors } = checkBatch({
        recipients: [
          { mobileNo: GB_MOBILE, personalizationSubstitutionTags: [{ tagName: '[name]', tagValue: 'Ann' }] },
          {
            mobileNo: '33612345678',
            personalizationSubstitutionTags: [
              { tagName: '[name]', tagValue: 'Bo' },
              { tagName: 'name', tagValue: 'Bo' },
            ],
          },
        ],
      });
      assert.deepEqual(
        errors.map((e) => e.field),
        ['recipients[1].personalizationSubstitutionTags[1].tagName'],
      );
    });
  });

  describe('scheduleDateTime: RFC 3339; with an offset an instant, without one in the account time zone', () => {
    const UTC = { timeZoneOffset: 'UTC+00:00~Coordinated Universal Time' };
    const BRAZIL = { timeZoneOffset: 'UTC-03:00~Brasilia Time' };
    const cases: Array<[string, string, { timeZoneOffset: string }, number | null]> = [
      ['with an offset', '2026-11-23T14:00:00+05:30', UTC, Date.UTC(2026, 10, 23, 8, 30)],
      ['in UTC (Z)', '2026-11-23T14:00:00Z', INDIA, Date.UTC(2026, 10, 23, 14)],
      ['with a lower-case t and z', '2026-11-23t14:00:00z', INDIA, Date.UTC(2026, 10, 23, 14)],
      ['without an offset, in an account east of UTC', '2026-11-23T14:00:00', INDIA, Date.UTC(2026, 10, 23, 8, 30)],
      ['without an offset, in an account west of UTC', '2026-11-23T14:00:00', BRAZIL, Date.UTC(2026, 10, 23, 17)],
      [
        'with a space for the T and a fraction',
        '2026-11-23 14:00:00.25-04:00',
        UTC,
        Date.UTC(2026, 10, 23, 18, 0, 0, 250),
      ],
      [
        'with a leap second, as the last second of its minute',
        '2026-12-31T23:59:60Z',
        UTC,
        Date.UTC(2026, 11, 31, 23, 59, 59),
      ],
      ['on the last day of February', '2027-02-28T00:00:00Z', UTC, Date.UTC(2027, 1, 28)],
      ['in the past, as now', '2020-01-01T00:00:00Z', UTC, null],
      ['at this very instant, as now', '2026-11-22T17:30:00', INDIA, null],
      ['a minute ago in the account time zone, as now', '2026-11-22T17:29:00', INDIA, null],
    ];
    for (const [name, text, account, scheduledAt] of cases) {
      it(`reads a time ${name}`, () => {
        const { draft, errors } = checkSingle({ scheduleDateTime: text }, account);
        assert.deepEqual(errors, []);
        assert.equal(draft.scheduledAt, scheduledAt);
      });
    }

    it('reads no scheduleDateTime as now', () => assert.equal(checkSingle({}).draft.scheduledAt, null));

    const refused: Array<[string, RegExp]> = [
      ['2026-11-23', /^must be a date and time in RFC 3339, like 2026-11-23T14:00:00\+05:30/],
      ['23/11/2026 14:00', /RFC 3339/],
      ['2026-11-23T14:00', /RFC 3339/],
      ['2026-11-23T14:00:00+0530', /RFC 3339/],
      ['2026-02-29T10:00:00Z', /^is not a date and time that exists/],
      ['2026-13-01T10:00:00Z', /that exists/],
      ['2026-11-31T10:00:00Z', /that exists/],
      ['2026-11-23T24:00:00Z', /that exists/],
      ['2026-11-23T14:60:00Z', /that exists/],
      ['2026-11-23T14:00:61Z', /that exists/],
      ['2026-11-23T14:00:00+24:00', /^has an offset out of range/],
      ['2027-11-24T12:00:00Z', /^must be at most a year ahead$/],
    ];
    for (const [text, message] of refused) {
      it(`refuses ${text}`, () => {
        const { draft, errors } = checkSingle({ scheduleDateTime: text });
        assert.deepEqual(
          errors.map((e) => e.field),
          ['scheduleDateTime'],
        );
        assert.match(errors[0].message, message);
        assert.equal(draft.scheduledAt, null);
      });
    }
  });

  describe('landingPageId and shortner', () => {
    it('gives a landing page the default shortener: the service host, a link per recipient', () => {
      const { draft, errors } = checkSingle({ landingPageId: PAGE.toUpperCase() });
      assert.deepEqual(errors, []);
      assert.equal(draft.landingPageId, PAGE);
      assert.deepEqual(draft.shortener, { url: null, unique: true });
    });

    it('carries the shortner settings given with a landing page', () => {
      const { draft } = checkSingle({
        landingPageId: PAGE,
        shortner: { shortnerUrl: 'https://s.example.com', isUniqueUrl: false },
      });
      assert.deepEqual(draft.shortener, { url: 'https://s.example.com', unique: false });
    });

    const alone = 'full parts alone does not fit with it';
    it(`counts the link, after a space, in the parts: a body of ${MAX_PARTS} ${alone}`, () => {
      assert.deepEqual(checkSingle({ body: 'x'.repeat(MAX_PARTS * 153) }).errors, []);
      assert.deepEqual(
        checkSingle({ landingPageId: PAGE, body: 'x'.repeat(MAX_PARTS * 153) }).errors.map((e) => e.field),
        ['body'],
      );
      assert.deepEqual(
        checkSingle({ landingPageId: PAGE, body: 'x'.repeat(MAX_PARTS * 153 - 1 - LINK_LENGTH) }).errors,
        [],
      );
      assert.deepEqual(checkSingle({ landingPageId: PAGE, body: 'x'.repeat(MAX_PARTS * 153 - LINK_LENGTH) }).errors, [
        {
          field: 'body',
          message: `takes ${MAX_PARTS + 1} SMS parts with the landing page link; a message has at most ${MAX_PARTS}`,
        },
      ]);
    });

    it(
      'counts the link where [landingPageUrl] puts it, each time ' + 'it is written, and with the custom host given',
      () => {
        const body = (n: number) => `${'x'.repeat(n)} [landingPageUrl] [landingPageUrl]`;
        const room = MAX_PARTS * 153 - 2 - 2 * LINK_LENGTH;
        assert.deepEqual(checkSingle({ landingPageId: PAGE, body: body(room) }).errors, []);
        assert.deepEqual(
          checkSingle({ landingPageId: PAGE, body: body(room + 1) }).errors.map((e) => e.field),
          ['body'],
        );
        // https://go.example.com/ is a shorter start than https://herald.example.com/l/: room for more.
        const shorter = `${PUBLIC_URL}/l`.length - 'https://go.example.com'.length;
        assert.deepEqual(
          checkSingle({
            landingPageId: PAGE,
            body: body(room + 2 * shorter),
            shortner: { shortnerUrl: 'https://GO.example.com/' },
          }).errors,
          [],
        );
      },
    );

    it('keeps [landingPageUrl] for the link: refused in a body without landingPageId, and as a tagName', () => {
      assert.deepEqual(checkSingle({ body: 'Open [landingPageUrl]' }).errors, [
        {
          field: 'body',
          message: 'holds [landingPageUrl], the place of the landing page link: give landingPageId too, or take it out',
        },
      ]);
      assert.deepEqual(
        checkSingle({
          landingPageId: PAGE,
          personalizationSubstitutionTags: [{ tagName: '[landingPageUrl]', tagValue: 'https://elsewhere.example' }],
        }).errors,
        [
          {
            field: 'personalizationSubstitutionTags[0].tagName',
            message: 'is the place of the landing page link, which the service fills: use another tagName',
          },
        ],
      );
    });

    it('refuses shortner without a landing page: it shortens nothing else', () => {
      for (const shortner of [{}, { isUniqueUrl: true }, { shortnerUrl: 'https://s.example.com' }]) {
        const { draft, errors } = checkBatch({ listId: [LIST_A], shortner });
        assert.deepEqual(errors, [
          {
            field: 'shortner',
            message: 'applies only to the landing page link: give landingPageId too, or leave shortner out',
          },
        ]);
        assert.equal(draft.shortener, null);
      }
    });
  });

  describe('batch: lists and recipients', () => {
    it('turns a batch into its draft', () => {
      const { draft, errors } = checkBatch({
        listId: [LIST_A],
        recipients: [
          { mobileNo: GB_MOBILE, personalizationSubstitutionTags: [{ tagName: '[name]', tagValue: 'Ann' }] },
          { mobileNo: 12025550123 },
        ],
        scheduleDateTime: '2026-11-23T09:00:00Z',
        webHookUrl: 'https://hooks.example.com/sms',
      });
      assert.deepEqual(errors, []);
      assert.deepEqual(
        draft,
        draftOf({
          kind: 'batch',
          body: 'Hello [name]',
          recipients: [
            { mobile: GB_MOBILE, tags: { '[name]': 'Ann' } },
            { mobile: '12025550123', tags: {} },
          ],
          listIds: [LIST_A],
          scheduledAt: Date.UTC(2026, 10, 23, 9),
          webhookUrl: 'https://hooks.example.com/sms',
          smartEncoding: false,
        }),
      );
    });

    const neither: Array<[string, Record<string, unknown>]> = [
      ['neither listId nor recipients', {}],
      ['both empty', { listId: [], recipients: [] }],
      ['an empty listId alone', { listId: [] }],
      ['empty recipients alone', { recipients: [] }],
    ];
    for (const [name, fields] of neither) {
      it(`refuses ${name}`, () => {
        assert.deepEqual(checkBatch(fields).errors, [
          { field: 'listId', message: 'or recipients is required: give at least one list id or one recipient' },
        ]);
      });
    }

    it('takes lists alone, and recipients alone', () => {
      assert.deepEqual(checkBatch({ listId: [LIST_A] }).errors, []);
      assert.deepEqual(checkBatch({ recipients: [{ mobileNo: GB_MOBILE }] }).errors, []);
    });

    it('reads a list id given twice, in any case, as one', () => {
      const { draft, errors } = checkBatch({ listId: [LIST_A, LIST_B.toUpperCase(), LIST_A.toUpperCase(), LIST_B] });
      assert.deepEqual(errors, []);
      assert.deepEqual(draft.listIds, [LIST_A, LIST_B]);
    });

    it('keeps the first entry of a number given twice, however it was written', () => {
      const { draft, errors } = checkBatch({
        recipients: [
          { mobileNo: '33612345678' },
          { mobileNo: GB_MOBILE, personalizationSubstitutionTags: [{ tagName: '[name]', tagValue: 'first' }] },
          { mobileNo: 447911123456, personalizationSubstitutionTags: [{ tagName: '[name]', tagValue: 'second' }] },
          { mobileNo: '4407911123456', personalizationSubstitutionTags: [{ tagName: '[name]', tagValue: 'third' }] },
        ],
      });
      assert.deepEqual(errors, []);
      assert.deepEqual(draft.recipients, [
        { mobile: '33612345678', tags: {} },
        { mobile: GB_MOBILE, tags: { '[name]': 'first' } },
      ]);
    });
  });

  it('lists every problem of a request at once, in the order of its fields', () => {
    const { errors } = checkSingle({
      recipient: '+44',
      senderName: 'Far too long a name',
      body: ' ',
      personalizationSubstitutionTags: [{ tagName: 'code', tagValue: '1' }],
      scheduleDateTime: 'tomorrow',
      shortner: { isUniqueUrl: true },
    });
    assert.deepEqual(
      errors.map((e) => e.field),
      ['recipient', 'senderName', 'body', 'personalizationSubstitutionTags[0].tagName', 'scheduleDateTime', 'shortner'],
    );

    const many = checkBatch({
      listId: [LIST_A],
      recipients: [
        { mobileNo: 'x' },
        { mobileNo: GB_MOBILE },
        { mobileNo: '1', personalizationSubstitutionTags: [{ tagName: '[]', tagValue: '' }] },
      ],
      senderName: '',
    });
    assert.deepEqual(
      many.errors.map((e) => e.field),
      [
        'recipients[0].mobileNo',
        'recipients[2].mobileNo',
        'recipients[2].personalizationSubstitutionTags[0].tagName',
        'senderName',
      ],
    );
  });
});

forEachDatabase((dialect) => {
  describe('prepareSms', () => {
    const clock = new ManualClock(NOW);
    const config = { defaultSenderName: 'HERALD' };
    let database: TestDatabase;
    let accountId: string;
    let ownList: string;
    let otherList: string;
    let otherAccount: string;
    beforeEach(async () => {
      database = await createTestDatabase(dialect);
      const { db } = database;
      accountId = (await createAccount(db, clock, { userName: 'alice@example.com', password: 'correct horse battery' }))
        .id;
      const other = (await createAccount(db, clock, { userName: 'bob@example.com', password: 'correct horse battery' }))
        .id;
      otherAccount = other;
      const byAdmin = { actor: 'admin' as const, ip: null, at: clock.now() };
      const named = (id: string, name: string) =>
        addSenderName(db, clock, { accountId: id, name, by: byAdmin, defaultSenderName: 'HERALD' });
      await named(accountId, 'Acme');
      await named(other, 'Bobs');
      ownList = (await createList(db, clock, accountId, 'VIP')).listId;
      otherList = (await createList(db, clock, other, 'VIP')).listId;
    });
    afterEach(() => database.close());

    const rejection = async (draft: SmsDraft): Promise<FieldError[]> => {
      const error = await prepareSms(database.reads, accountId, draft, config).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(error instanceof AppError, `expected a rejection, got ${String(error)}`);
      assert.equal(error.statusCode, 422);
      return error.errors;
    };

    it("takes the account's own sender name and lists", async () => {
      await prepareSms(database.reads, accountId, draftOf({ kind: 'batch', listIds: [ownList] }), config);
    });

    it("takes the service's default sender name, which no account registers", async () => {
      await prepareSms(database.reads, accountId, draftOf({ senderName: 'HERALD' }), config);
    });

    it("refuses another account's sender name, and an unknown one, alike", async () => {
      for (const senderName of ['Bobs', 'Nobody']) {
        assert.deepEqual(await rejection(draftOf({ senderName })), [
          { field: 'senderName', message: "is not a sender name of this account, nor the service's default HERALD" },
        ]);
      }
    });

    it('compares sender names exactly, and points to the one that differs only in case', async () => {
      assert.deepEqual(await rejection(draftOf({ senderName: 'ACME' })), [
        {
          field: 'senderName',
          message: 'is not a sender name of this account; sender names are compared exactly: did you mean Acme?',
        },
      ]);
      assert.match((await rejection(draftOf({ senderName: 'Herald' })))[0].message, /did you mean HERALD\?$/);
    });

    it("refuses another account's list and an unknown one alike, naming each", async () => {
      const unknown = LIST_B;
      assert.deepEqual(await rejection(draftOf({ kind: 'batch', listIds: [otherList, ownList, unknown] })), [
        { field: 'listId', message: `holds ${otherList}, which is not a list of this account` },
        { field: 'listId', message: `holds ${unknown}, which is not a list of this account` },
      ]);
    });

    const landingPage = async (account: string, name: string) => {
      const page = { id: randomUUID(), accountId: account, name, url: 'https://example.com/offer', now: NOW };
      await database.call(postLandingPage, { claim: undefined, args: page });
      return page.id;
    };

    it(
      "takes the account's own landing page, with the service's " + 'shortener or a domain registered for the account',
      async () => {
        const own = await landingPage(accountId, 'Offer');
        await addShortenerDomain(database.db, clock, {
          accountId,
          domain: 'go.acme.example',
          serviceHost: 'herald.example.com',
        });
        for (const url of [null, 'https://go.acme.example', 'http://GO.acme.example/']) {
          await prepareSms(
            database.reads,
            accountId,
            draftOf({ landingPageId: own, shortener: { url, unique: true } }),
            config,
          );
        }
      },
    );

    it("refuses another account's landing page and an unknown one alike", async () => {
      const theirs = await landingPage(otherAccount, 'Offer');
      for (const id of [theirs, PAGE]) {
        assert.deepEqual(await rejection(draftOf({ landingPageId: id, shortener: { url: null, unique: true } })), [
          { field: 'landingPageId', message: `is ${id}, which is not a landing page of this account` },
        ]);
      }
    });

    it(
      'refuses a shortnerUrl that is not https:// or http:// and a ' + "domain of the account's, with nothing after it",
      async () => {
        const own = await landingPage(accountId, 'Offer');
        await addShortenerDomain(database.db, clock, {
          accountId,
          domain: 'go.acme.example',
          serviceHost: 'herald.example.com',
        });
        await addShortenerDomain(database.db, clock, {
          accountId: otherAccount,
          domain: 'go.bobs.example',
          serviceHost: 'herald.example.com',
        });
        const refusal = async (url: string) =>
          rejection(draftOf({ landingPageId: own, shortener: { url, unique: true } }));
        for (const url of [
          'https://go.acme.example/x',
          'https://go.acme.example:8443',
          'https://go.acme.example?a',
          'https://u:p@go.acme.example',
          'ftp://go.acme.example',
          'go.acme.example',
          'https://',
        ]) {
          assert.deepEqual(
            await refusal(url),
            [
              {
                field: 'shortner.shortnerUrl',
                message:
                  'must be https://<domain> or http://<domain> with nothing after it (no path, port or ' +
                  'query), the domain one of the shortener domains registered for this account',
              },
            ],
            url,
          );
        }
        for (const host of ['go.bobs.example', 'unknown.example', 'herald.example.com']) {
          assert.deepEqual(await refusal(`https://${host}`), [
            {
              field: 'shortner.shortnerUrl',
              message: `names ${host}, which is not a shortener domain of this account; the operator registers them`,
            },
          ]);
        }
      },
    );

    it('lists every problem in one 422', async () => {
      const error = await prepareSms(
        database.reads,
        accountId,
        draftOf({ senderName: 'Bobs', listIds: [otherList], landingPageId: PAGE }),
        config,
      ).catch((e: unknown) => e);
      assert.ok(error instanceof AppError);
      assert.equal(error.message, 'The SMS request was rejected with 3 problems; nothing was queued.');
      assert.deepEqual(
        error.errors.map((e) => e.field),
        ['senderName', 'listId', 'landingPageId'],
      );
      const four = await rejection(
        draftOf({
          senderName: 'Bobs',
          listIds: [otherList],
          landingPageId: PAGE,
          shortener: { url: 'https://unknown.example', unique: true },
        }),
      );
      assert.deepEqual(
        four.map((e) => e.field),
        ['senderName', 'listId', 'landingPageId', 'shortner.shortnerUrl'],
      );
    });
  });
});
