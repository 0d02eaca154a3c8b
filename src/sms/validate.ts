import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { sendRejected, type FieldError } from '../errors.ts';
import { mobileFromDigits } from '../crm/mobile-number.ts';
import { listProblems } from '../messaging/recipients.ts';
import { sendTime } from '../messaging/schedule.ts';
import { checkTags, tagsProblem } from '../messaging/tags.ts';
import { isValidSenderName, listSenderNames } from '../senders/names.ts';
import { landingPageUrl } from '../links/landing-pages.ts';
import { linkBase, parseShortenerUrl, shortenerAccount } from '../links/shortener.ts';
import type { SmsDraft } from './draft.ts';
import { LANDING_PAGE_TAG, withSampleLink } from './links.ts';
import type { SmsBatchRequest, SmsRequest, SmsSingleRequest } from './schemas.ts';
import { isBlank, MAX_PARTS, measure } from './segments.ts';
import { smartEncoded } from './smart-encoding.ts';

/**
 * The checks of an SMS request that need the request alone (400s), collecting every
 * problem by field path rather than stopping at the first, and the request as an SmsDraft.
 * The body has passed the route's schema (schemas.ts); the webhook URL was vetted at the
 * HTTP boundary. `now` is epoch ms; `account.timeZoneOffset` reads a scheduleDateTime
 * written without an offset; `publicUrl` starts the service's own short links, which count
 * in the text's length.
 */
export function checkSmsRequest(
  kind: SmsDraft['kind'],
  body: SmsRequest,
  account: { timeZoneOffset: string; smartEncoding?: boolean },
  now: number,
  publicUrl: string,
): { draft: SmsDraft; errors: FieldError[] } {
  const errors: FieldError[] = [];
  // Measured as it will go: smart encoding may keep a text in GSM-7, and so within MAX_PARTS.
  const encoded = (text: string) => (account.smartEncoding === true ? smartEncoded(text).text : text);
  const draft: SmsDraft = {
    kind,
    senderName: body.senderName,
    body: body.body,
    isBodyEncrypted: body.isBodyEncrypted ?? false,
    tags: {},
    recipients: [],
    listIds: [],
    scheduledAt: null,
    landingPageId: body.landingPageId?.toLowerCase() ?? null,
    shortener: null,
    webhookUrl: body.webHookUrl ?? null,
    smartEncoding: account.smartEncoding === true,
  };
  if (draft.landingPageId !== null) {
    draft.shortener = { url: body.shortner?.shortnerUrl ?? null, unique: body.shortner?.isUniqueUrl ?? true };
  }

  if (kind === 'single') {
    const single = body as SmsSingleRequest;
    const mobile = mobileFromDigits(single.recipient);
    if ('problem' in mobile) errors.push({ field: 'recipient', message: mobile.problem });
    else draft.recipients.push({ mobile: mobile.mobile, tags: {} });
  } else {
    checkAudience(body as SmsBatchRequest, draft, errors);
  }

  if (!isValidSenderName(body.senderName)) {
    errors.push({
      field: 'senderName',
      message: 'must be 1 to 11 letters, digits or spaces with at least one letter, or 3 to 15 digits',
    });
  }
  const tagProblem = tagsProblem(body.body, 'sms');
  if (isBlank(body.body)) {
    errors.push({ field: 'body', message: 'must not be empty' });
  } else if (tagProblem) {
    errors.push({ field: 'body', message: tagProblem });
  } else if (draft.shortener === null) {
    const { parts } = measure(encoded(body.body));
    if (parts > MAX_PARTS)
      errors.push({ field: 'body', message: `takes ${parts} SMS parts; a message has at most ${MAX_PARTS}` });
    if (body.body.includes(LANDING_PAGE_TAG)) {
      const remedy = 'give landingPageId too, or take it out';
      errors.push({
        field: 'body',
        message: `holds ${LANDING_PAGE_TAG}, the place of the landing page link: ${remedy}`,
      });
    }
  } else {
    // The link is part of the text: a body that fits alone may not fit with it.
    const { parts } = measure(encoded(withSampleLink(body.body, linkBase(draft.shortener.url, publicUrl))));
    if (parts > MAX_PARTS)
      errors.push({
        field: 'body',
        message: `takes ${parts} SMS parts with the landing page link; a message has at most ${MAX_PARTS}`,
      });
  }
  if (kind === 'single')
    draft.tags = checkTags(
      (body as SmsSingleRequest).personalizationSubstitutionTags,
      'personalizationSubstitutionTags',
      errors,
      RESERVED_TAGS,
    );

  const when = sendTime(body as SmsBatchRequest, account.timeZoneOffset, now, '', errors);
  draft.scheduledAt = when.scheduledAt;
  if (when.localDelivery !== null) draft.localDelivery = when.localDelivery;

  // The shortener shortens the landing page link and nothing else (SPEC §2.4): without a
  // landing page it would do nothing, and a client who sent it expects something done.
  if (body.shortner !== undefined && draft.landingPageId === null) {
    errors.push({
      field: 'shortner',
      message: 'applies only to the landing page link: give landingPageId too, or leave shortner out',
    });
  }
  return { draft, errors };
}

const RESERVED_TAGS = {
  [LANDING_PAGE_TAG]: 'is the place of the landing page link, which the service fills: use another tagName',
};

/** The batch's lists and recipients: at least one of them, lists without repeats, a number given twice kept once. */
function checkAudience(batch: SmsBatchRequest, draft: SmsDraft, errors: FieldError[]): void {
  draft.listIds = [...new Set((batch.listId ?? []).map((id) => id.toLowerCase()))];
  const seen = new Set<string>();
  batch.recipients?.forEach((recipient, i) => {
    const at = `recipients[${i}]`;
    const mobile = mobileFromDigits(recipient.mobileNo);
    if ('problem' in mobile) errors.push({ field: `${at}.mobileNo`, message: mobile.problem });
    const tags = checkTags(
      recipient.personalizationSubstitutionTags,
      `${at}.personalizationSubstitutionTags`,
      errors,
      RESERVED_TAGS,
    );
    if (!('problem' in mobile) && !seen.has(mobile.mobile)) {
      seen.add(mobile.mobile);
      draft.recipients.push({ mobile: mobile.mobile, tags });
    }
  });
  if (draft.listIds.length === 0 && (batch.recipients ?? []).length === 0) {
    errors.push({ field: 'listId', message: 'or recipients is required: give at least one list id or one recipient' });
  }
}

/**
 * The checks of a draft against the account (422), only reads, run before the request's
 * transaction opens (as crm/batches.ts prepareBatch): its sender name, lists, landing page
 * and shortener. Throws one error listing every problem. `db` is for reads
 * (Database.reads): nothing read here is deleted under the request.
 */
export async function prepareSms(
  db: Kysely<Schema>,
  accountId: string,
  draft: SmsDraft,
  config: { defaultSenderName: string },
): Promise<void> {
  const errors: FieldError[] = [];

  if (draft.senderName !== config.defaultSenderName) {
    const names = await listSenderNames(db, accountId);
    if (!names.includes(draft.senderName)) {
      // Compared exactly: the name shows on handsets as written, and it is the name as
      // registered that was verified. One that differs only in case is pointed to.
      const wanted = draft.senderName.toLowerCase();
      const meant = [config.defaultSenderName, ...names].find((name) => name.toLowerCase() === wanted);
      errors.push({
        field: 'senderName',
        message:
          meant === undefined
            ? `is not a sender name of this account, nor the service's default ${config.defaultSenderName}`
            : `is not a sender name of this account; sender names are compared exactly: did you mean ${meant}?`,
      });
    }
  }

  errors.push(...(await listProblems(db, accountId, draft.listIds)));

  if (draft.landingPageId !== null && (await landingPageUrl(db, accountId, draft.landingPageId)) === undefined) {
    // Another account's landing page is as unknown as a missing one.
    errors.push({
      field: 'landingPageId',
      message: `is ${draft.landingPageId}, which is not a landing page of this account`,
    });
  }
  if (draft.shortener !== null && draft.shortener.url !== null) {
    const shortener = parseShortenerUrl(draft.shortener.url);
    if (shortener === undefined) {
      errors.push({
        field: 'shortner.shortnerUrl',
        message:
          'must be https://<domain> or http://<domain> with nothing after it (no path, port or query), the ' +
          'domain one of the shortener domains registered for this account',
      });
    } else if ((await shortenerAccount(db, shortener.host)) !== accountId) {
      const why = 'which is not a shortener domain of this account; the operator registers them';
      errors.push({ field: 'shortner.shortnerUrl', message: `names ${shortener.host}, ${why}` });
    }
  }

  if (errors.length > 0) {
    throw sendRejected('SMS request', errors);
  }
}
