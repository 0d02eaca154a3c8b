import type { Kysely } from 'kysely';
import { isValidSenderName } from '../accounts/service.ts';
import { offsetMinutes } from '../accounts/time-zone.ts';
import type { Schema } from '../db/schema.ts';
import { unprocessable, type FieldError } from '../errors.ts';
import { mobileFromDigits } from '../mobile-number.ts';
import { landingPageUrl } from '../links/landing-pages.ts';
import { linkBase, parseShortenerUrl, shortenerAccount } from '../links/shortener.ts';
import type { SmsDraft } from './draft.ts';
import { LANDING_PAGE_TAG, withSampleLink } from './links.ts';
import type { SmsBatchRequest, SmsRequest, SmsSingleRequest } from './schemas.ts';
import { MAX_PARTS, measure } from './segments.ts';

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
  account: { timeZoneOffset: string },
  now: number,
  publicUrl: string,
): { draft: SmsDraft; errors: FieldError[] } {
  const errors: FieldError[] = [];
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
    errors.push({ field: 'senderName', message: 'must be 1 to 11 letters, digits or spaces with at least one letter, or 3 to 15 digits' });
  }
  if (body.body.trim() === '') {
    errors.push({ field: 'body', message: 'must not be empty' });
  } else if (draft.shortener === null) {
    const { parts } = measure(body.body);
    if (parts > MAX_PARTS) errors.push({ field: 'body', message: `takes ${parts} SMS parts; a message has at most ${MAX_PARTS}` });
    if (body.body.includes(LANDING_PAGE_TAG)) {
      errors.push({ field: 'body', message: `holds ${LANDING_PAGE_TAG}, the place of the landing page link: give landingPageId too, or take it out` });
    }
  } else {
    // The link is part of the text: a body that fits alone may not fit with it.
    const { parts } = measure(withSampleLink(body.body, linkBase(draft.shortener.url, publicUrl)));
    if (parts > MAX_PARTS) errors.push({ field: 'body', message: `takes ${parts} SMS parts with the landing page link; a message has at most ${MAX_PARTS}` });
  }
  if (kind === 'single') draft.tags = checkTags((body as SmsSingleRequest).personalizationSubstitutionTags, 'personalizationSubstitutionTags', errors);

  if (body.scheduleDateTime !== undefined) {
    const at = scheduledTime(body.scheduleDateTime, account.timeZoneOffset, now);
    if (typeof at === 'string') errors.push({ field: 'scheduleDateTime', message: at });
    else draft.scheduledAt = at;
  }

  // The shortener shortens the landing page link and nothing else (SPEC §2.4): without a
  // landing page it would do nothing, and a client who sent it expects something done.
  if (body.shortner !== undefined && draft.landingPageId === null) {
    errors.push({ field: 'shortner', message: 'applies only to the landing page link: give landingPageId too, or leave shortner out' });
  }
  return { draft, errors };
}

/** The batch's lists and recipients: at least one of them, lists without repeats, a number given twice kept once. */
function checkAudience(batch: SmsBatchRequest, draft: SmsDraft, errors: FieldError[]): void {
  draft.listIds = [...new Set((batch.listId ?? []).map((id) => id.toLowerCase()))];
  const seen = new Set<string>();
  batch.recipients?.forEach((recipient, i) => {
    const at = `recipients[${i}]`;
    const mobile = mobileFromDigits(recipient.mobileNo);
    if ('problem' in mobile) errors.push({ field: `${at}.mobileNo`, message: mobile.problem });
    const tags = checkTags(recipient.personalizationSubstitutionTags, `${at}.personalizationSubstitutionTags`, errors);
    if (!('problem' in mobile) && !seen.has(mobile.mobile)) {
      seen.add(mobile.mobile);
      draft.recipients.push({ mobile: mobile.mobile, tags });
    }
  });
  if (draft.listIds.length === 0 && (batch.recipients ?? []).length === 0) {
    errors.push({ field: 'listId', message: 'or recipients is required: give at least one list id or one recipient' });
  }
}

// A tag is found in a text by the same rule (messaging/tags.ts): 1 to 64 characters other
// than brackets and line breaks, between square brackets.
const TAG_NAME = /^\[[^[\]\n]{1,64}\]$/;

/** Tags by tagName as written; each tagName once, so that which value a tag takes is never a guess. */
function checkTags(tags: Array<{ tagName: string; tagValue: string }> | undefined, path: string, errors: FieldError[]): Record<string, string> {
  const values: Record<string, string> = {};
  const first = new Map<string, number>();
  tags?.forEach(({ tagName, tagValue }, i) => {
    const field = `${path}[${i}].tagName`;
    if (!TAG_NAME.test(tagName)) {
      errors.push({ field, message: 'must be a name in square brackets, like [firstName]: 1 to 64 characters, none of them a bracket' });
    } else if (tagName === LANDING_PAGE_TAG) {
      errors.push({ field, message: 'is the place of the landing page link, which the service fills: use another tagName' });
    } else if (first.has(tagName)) {
      errors.push({ field, message: `repeats the tagName of ${path}[${first.get(tagName)}]` });
    } else {
      first.set(tagName, i);
      values[tagName] = tagValue;
    }
  });
  return values;
}

// RFC 3339 §5.6 date-time, the offset optional (read in the account's time zone when absent);
// the T may be a t or a space (§5.6, NOTE).
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))?$/;

/** Sends are scheduled at most this far ahead: a later time is far more likely a typo in the year than a plan. */
export const MAX_SCHEDULE_AHEAD_MS = 366 * 24 * 60 * 60 * 1000;

/**
 * A scheduleDateTime as epoch ms, null for now (a time in the past is now), or the problem in
 * words. An offset makes it an instant; without one it is a wall-clock time in the account's
 * time zone (ARCHITECTURE.md, "Decisions").
 */
export function scheduledTime(text: string, timeZoneOffset: string, now: number): number | null | string {
  const match = DATE_TIME.exec(text);
  if (!match) {
    return 'must be a date and time in RFC 3339, like 2026-11-23T14:00:00+05:30 (without the offset, it is read in the account time zone)';
  }
  const [, year, month, day, hour, minute, second, fraction, zulu, sign, offsetHours, offsetMinutesText] = match;
  const y = Number(year);
  const m = Number(month);
  const d = Number(day);
  // RFC 3339 allows a leap second, 60; it is read as the last second of its minute.
  const s = Math.min(Number(second), 59);
  const daysInMonth = new Date(Date.UTC(2000 + (y % 400), m, 0)).getUTCDate();
  if (m < 1 || m > 12 || d < 1 || d > daysInMonth || Number(hour) > 23 || Number(minute) > 59 || Number(second) > 60) {
    return 'is not a date and time that exists: check the month, day, hours, minutes and seconds';
  }
  let offset: number;
  if (zulu !== undefined) offset = 0;
  else if (sign !== undefined) {
    if (Number(offsetHours) > 23 || Number(offsetMinutesText) > 59) return 'has an offset out of range: at most ±23:59';
    offset = (sign === '+' ? 1 : -1) * (Number(offsetHours) * 60 + Number(offsetMinutesText));
  } else {
    // The account's offset was checked when it was set.
    offset = offsetMinutes(timeZoneOffset) ?? 0;
  }
  const wallClock = new Date(0);
  wallClock.setUTCFullYear(y, m - 1, d);
  wallClock.setUTCHours(Number(hour), Number(minute), s, Number((fraction ?? '0').slice(0, 3).padEnd(3, '0')));
  const at = wallClock.getTime() - offset * 60_000;
  if (at <= now) return null;
  if (at - now > MAX_SCHEDULE_AHEAD_MS) return 'must be at most a year ahead';
  return at;
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
    const names = (await db.selectFrom('sender_names').select('name').where('account_id', '=', accountId).execute()).map((row) => row.name);
    if (!names.includes(draft.senderName)) {
      // Compared exactly: the name shows on handsets as written, and it is the name as
      // registered that was verified. One that differs only in case is pointed to.
      const wanted = draft.senderName.toLowerCase();
      const meant = [config.defaultSenderName, ...names].find((name) => name.toLowerCase() === wanted);
      errors.push({
        field: 'senderName',
        message: meant === undefined
          ? `is not a sender name of this account, nor the service's default ${config.defaultSenderName}`
          : `is not a sender name of this account; sender names are compared exactly: did you mean ${meant}?`,
      });
    }
  }

  if (draft.listIds.length > 0) {
    const rows = await db.selectFrom('contact_lists').select('id').where('account_id', '=', accountId).where('id', 'in', draft.listIds).execute();
    const known = new Set(rows.map((row) => row.id));
    for (const id of draft.listIds) {
      // Another account's list is as unknown as a missing one: nothing tells them apart.
      if (!known.has(id)) errors.push({ field: 'listId', message: `holds ${id}, which is not a list of this account` });
    }
  }

  if (draft.landingPageId !== null && (await landingPageUrl(db, accountId, draft.landingPageId)) === undefined) {
    // Another account's landing page is as unknown as a missing one.
    errors.push({ field: 'landingPageId', message: `is ${draft.landingPageId}, which is not a landing page of this account` });
  }
  if (draft.shortener !== null && draft.shortener.url !== null) {
    const shortener = parseShortenerUrl(draft.shortener.url);
    if (shortener === undefined) {
      errors.push({ field: 'shortner.shortnerUrl', message: 'must be https://<domain> or http://<domain> with nothing after it (no path, port or query), the domain one of the shortener domains registered for this account' });
    } else if ((await shortenerAccount(db, shortener.host)) !== accountId) {
      errors.push({ field: 'shortner.shortnerUrl', message: `names ${shortener.host}, which is not a shortener domain of this account; the operator registers them` });
    }
  }

  if (errors.length > 0) {
    throw unprocessable(`The SMS request was rejected with ${errors.length} problem${errors.length === 1 ? '' : 's'}; nothing was queued.`, errors);
  }
}
