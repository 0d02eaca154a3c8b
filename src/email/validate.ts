import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { emailAddressProblem } from '../crm/email-address.ts';
import { badRequest, sendRejected, type FieldError } from '../errors.ts';
import { listProblems } from '../messaging/recipients.ts';
import { sendTime, type LocalDelivery } from '../messaging/schedule.ts';
import { checkTags, tagsProblem } from '../messaging/tags.ts';
import { campaignHtml, htmlProblem } from './campaigns.ts';
import type { EmailParty } from './render.ts';
import { MAX_HTML_BYTES, type EmailBatchRequest } from './schemas.ts';

/** An email batch as the pipeline takes it, once validated: plain data (a procedure's argument). */
export interface EmailDraft {
  from: EmailParty;
  replyTo: EmailParty | undefined;
  subject: string;
  preheader: string | undefined;
  /** The HTML of emailBody, decoded; null when the batch names a campaign. */
  html: string | null;
  campaignId: string | null;
  /** Request recipients in request order, lower-cased; an address given twice keeps its first entry. */
  recipients: Array<{ address: string; tags: Record<string, string> }>;
  /** The account's lists to send to, lower-cased, without repeats. */
  listIds: string[];
  /** Epoch ms; null = now. */
  scheduledAt: number | null;
  /** deliverInRecipientTimeZone's time on each recipient's clock; null without it. */
  localDelivery: LocalDelivery | null;
  webhookUrl: string | null;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
// Standard Base64 (RFC 4648 §4), padded or not; no line breaks (a JSON string holds none).
export const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;
/** The HTML of emailBody, or the problem in words. */
export function decodedHtml(emailBody: string): string | { problem: string } {
  if (!BASE64.test(emailBody)) return { problem: 'must be Base64 (A-Z, a-z, 0-9, + and /, padded with =) of the HTML' };
  const bytes = Buffer.from(emailBody, 'base64');
  if (bytes.length > MAX_HTML_BYTES)
    return { problem: `holds ${bytes.length} bytes of HTML; at most ${MAX_HTML_BYTES}` };
  let html: string;
  try {
    html = utf8.decode(bytes);
  } catch {
    return { problem: 'must be Base64 of UTF-8 text: the decoded bytes are not UTF-8' };
  }
  return htmlProblem(html) ?? html;
}

function party(given: { email: string; displayName: string }, path: string, errors: FieldError[]): EmailParty {
  const problem = emailAddressProblem(given.email);
  if (problem) errors.push({ field: `${path}.email`, message: problem });
  return given.displayName === '' ? { email: given.email } : { email: given.email, displayName: given.displayName };
}

/**
 * The checks of an email batch that need the request alone (400s), every problem by field
 * path, and the request as an EmailDraft. The body has passed the route's schema; its webhook
 * URL was vetted at the HTTP boundary.
 */
export function checkEmailRequest(
  body: EmailBatchRequest,
  account: { timeZoneOffset: string },
  now: number,
): { draft: EmailDraft; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const details = body.sendingDetails;
  const draft: EmailDraft = {
    from: party(details.senderFrom, 'sendingDetails.senderFrom', errors),
    replyTo: details.replyTo && party(details.replyTo, 'sendingDetails.replyTo', errors),
    subject: details.subject,
    preheader: details.preHeaderText,
    html: null,
    campaignId: details.emailCampaignId?.toLowerCase() ?? null,
    recipients: [],
    listIds: [...new Set((details.listId ?? []).map((id) => id.toLowerCase()))],
    scheduledAt: null,
    localDelivery: null,
    webhookUrl: details.webHookUrl ?? null,
  };
  if (details.subject.trim() === '') errors.push({ field: 'sendingDetails.subject', message: 'must not be empty' });
  for (const [field, text] of [
    ['subject', details.subject],
    ['preHeaderText', details.preHeaderText ?? ''],
  ] as const) {
    const problem = tagsProblem(text, 'email');
    if (problem) errors.push({ field: `sendingDetails.${field}`, message: problem });
  }

  if (details.emailBody !== undefined && details.emailCampaignId !== undefined) {
    errors.push({
      field: 'sendingDetails.emailBody',
      message: 'and emailCampaignId are both given: give exactly one of them',
    });
  } else if (details.emailBody === undefined && details.emailCampaignId === undefined) {
    errors.push({
      field: 'sendingDetails.emailBody',
      message: 'or emailCampaignId is required: give exactly one of them',
    });
  } else if (details.emailBody !== undefined) {
    const html = decodedHtml(details.emailBody);
    if (typeof html === 'string') draft.html = html;
    else errors.push({ field: 'sendingDetails.emailBody', message: html.problem });
  }

  const seen = new Set<string>();
  body.recipients?.forEach((recipient, i) => {
    const at = `recipients[${i}]`;
    const problem = emailAddressProblem(recipient.to);
    if (problem) errors.push({ field: `${at}.to`, message: problem });
    const tags = checkTags(recipient.personalizationSubstitutionTags, `${at}.personalizationSubstitutionTags`, errors);
    const address = recipient.to.toLowerCase();
    if (!problem && !seen.has(address)) {
      seen.add(address);
      draft.recipients.push({ address, tags });
    }
  });
  if (draft.listIds.length === 0 && (body.recipients ?? []).length === 0) {
    errors.push({
      field: 'recipients',
      message: 'or sendingDetails.listId is required: give at least one recipient or one list id',
    });
  }

  const when = sendTime(details, account.timeZoneOffset, now, 'sendingDetails.', errors);
  draft.scheduledAt = when.scheduledAt;
  draft.localDelivery = when.localDelivery;
  return { draft, errors };
}

/**
 * The checks of a draft against the account (422), reads only, before the request's
 * transaction: its sender's domain, its campaign (whose HTML it takes) and its lists. Throws
 * one error listing every problem.
 */
export async function prepareEmail(
  db: Kysely<Schema>,
  accountId: string,
  draft: EmailDraft,
  config: { defaultEmailDomain: string },
): Promise<{ html: string }> {
  const errors: FieldError[] = [];
  const domain = draft.from.email.slice(draft.from.email.lastIndexOf('@') + 1).toLowerCase();
  if (domain !== config.defaultEmailDomain) {
    const owned = await db
      .selectFrom('sender_domains')
      .select('domain')
      .where('account_id', '=', accountId)
      .where('domain', '=', domain)
      .executeTakeFirst();
    if (!owned) {
      errors.push({
        field: 'sendingDetails.senderFrom.email',
        message:
          `is at ${domain}, which is neither the service's ` +
          `domain ${config.defaultEmailDomain} nor a sender domain of this account (the operator adds them)`,
      });
    }
  }
  let html = draft.html;
  if (draft.campaignId !== null) {
    html = (await campaignHtml(db, accountId, draft.campaignId)) ?? null;
    // Another account's campaign is as unknown as a missing one.
    if (html === null)
      errors.push({
        field: 'sendingDetails.emailCampaignId',
        message: `is ${draft.campaignId}, which is not an email campaign of this account`,
      });
  }
  errors.push(...(await listProblems(db, accountId, draft.listIds, 'sendingDetails.listId')));
  if (errors.length > 0) {
    throw sendRejected('email batch', errors);
  }
  return { html: html! };
}

export const invalidEmailRequest = (errors: FieldError[]) => badRequest('The email batch is not valid.', errors);
