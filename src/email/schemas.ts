import { Type, type Static } from 'typebox';
import { MultilineText, PageCursor, PageLimit, Uuid } from '../http/schemas.ts';
import { WebhookUrl } from '../webhooks/destination.ts';
import { DeliverInRecipientTimeZone, DryRunRecipients, Money, RecipientStatus } from '../messaging/schemas.ts';
import { MAX_EMAIL_ADDRESS } from '../crm/email-address.ts';
import { MAX_REPORT_BYTES } from './mail-reports.ts';

/**
 * SPEC §2.7, field names to the letter (`sendingDetails`, `senderFrom`, `preHeaderText`,
 * `webHookUrl`). What the schema cannot say in one error line (addresses, Base64, exactly one
 * of emailBody and emailCampaignId, the schedule, tag names) is checked by validate.ts.
 */

/** SPEC §8: emails per request. More go through lists. */
export const MAX_EMAIL_RECIPIENTS = 1000;
/** Lists one batch sends to. */
export const MAX_EMAIL_LISTS = 100;
/** Tags one recipient carries. */
export const MAX_TAGS = 100;
/**
 * The largest HTML of an email, in bytes once decoded: far past what mailbox providers show whole
 * (Gmail clips at 102 kB).
 */
export const MAX_HTML_BYTES = 2 * 1024 * 1024;

const Address = (description: string) => Type.String({ maxLength: MAX_EMAIL_ADDRESS + 10, description });

const Party = (what: string) =>
  Type.Object({
    email: Address(`The ${what} address.`),
    displayName: Type.String({ maxLength: 200, description: `The ${what} name shown beside the address.` }),
  });

export const SubstitutionTag = Type.Object({
  tagName: Type.String({
    maxLength: 66,
    description: 'The placeholder as written in the subject, preheader or body, in square brackets: [firstName].',
  }),
  tagValue: MultilineText({ maxLength: 10_000, description: 'Replacement text.' }),
});

export const SendingDetails = Type.Object({
  listId: Type.Optional(
    Type.Array(Uuid(), {
      maxItems: MAX_EMAIL_LISTS,
      description: 'Lists whose contacts (with emailOptIn true) receive the email.',
    }),
  ),
  senderFrom: Party('sender'),
  replyTo: Type.Optional(Party('reply-to')),
  subject: Type.String({ maxLength: 998, description: 'May contain substitution tags.' }),
  preHeaderText: Type.Optional(
    Type.String({
      maxLength: 500,
      description: 'Shown after the subject in the inbox; may contain substitution tags.',
    }),
  ),
  emailBody: Type.Optional(
    Type.String({
      maxLength: Math.ceil(MAX_HTML_BYTES / 3) * 4,
      description: 'The HTML of the email, UTF-8 encoded in Base64. Exactly one of emailBody and emailCampaignId.',
    }),
  ),
  emailCampaignId: Type.Optional(
    Uuid({ description: 'A stored campaign of the account (POST /email/campaigns) whose HTML is sent.' }),
  ),
  scheduleDateTime: Type.Optional(
    Type.String({
      maxLength: 40,
      description:
        "RFC 3339 (2026-11-23T14:00:00+05:30): with an offset an instant; without one, read in the account's " +
        'time zone. Absent or past: now.',
    }),
  ),
  deliverInRecipientTimeZone: Type.Optional(DeliverInRecipientTimeZone),
  webHookUrl: Type.Optional(
    WebhookUrl(
      'Receives the events (Processed, Dropped, Deferred, Bounce, Delivered, Open, Click, Spam Report, ' +
        'Unsubscribe), signed, gathered per URL.',
    ),
  ),
});

export const EmailRecipient = Type.Object({
  to: Address('The recipient address.'),
  personalizationSubstitutionTags: Type.Optional(
    Type.Array(SubstitutionTag, {
      maxItems: MAX_TAGS,
      description: "This recipient's tag values; they win over a list contact's data.",
    }),
  ),
});

/** SPEC §2.7. */
export const EmailBatchRequest = Type.Object({
  sendingDetails: SendingDetails,
  recipients: Type.Optional(
    Type.Array(EmailRecipient, {
      maxItems: MAX_EMAIL_RECIPIENTS,
      description:
        'Recipients named in the request; an address given twice (in any case) gets one email, with its first entry.',
    }),
  ),
});
export type EmailBatchRequest = Static<typeof EmailBatchRequest>;

/** SPEC §2.7, exactly: `status` is a boolean here, unlike SMS's. */
export const EmailAccepted = Type.Object({
  status: Type.Literal(true),
  message: Type.String(),
  data: Type.Object({
    BatchId: Type.String({ format: 'uuid' }),
    QueuedTimestamp: Type.Integer({ description: 'Epoch milliseconds.' }),
  }),
});

/** ARCHITECTURE.md, "setup objects": `POST /email/campaigns {name, html}` → 201 `{emailCampaignId, name}`. */
export const CampaignRequest = Type.Object({
  name: Type.String({
    maxLength: 200,
    description: 'A name of 1 to 100 characters, unique in the account (case-insensitively).',
  }),
  html: MultilineText({
    maxLength: MAX_HTML_BYTES,
    description: 'The HTML of the email, plain (not Base64); may contain substitution tags.',
  }),
});
export const CampaignBody = Type.Object({ emailCampaignId: Type.String({ format: 'uuid' }), name: Type.String() });
export const CampaignPage = Type.Object({
  campaigns: Type.Array(CampaignBody),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
});

export const PageQuery = Type.Object({
  limit: Type.Optional(PageLimit(1000, 100, 'Items')),
  cursor: Type.Optional(PageCursor(400)),
});

/** `GET /email/batch/{batchId}`: a page of its recipients, those at one status word with `status`. */
export const BatchReadQuery = Type.Object({ ...PageQuery.properties, status: Type.Optional(RecipientStatus('email')) });

export const SuppressionRequest = Type.Object({
  email: Address('The address never to send to.'),
  reason: Type.Optional(
    Type.String({ minLength: 1, maxLength: 200, description: "Why, in words; 'added by hand' when absent." }),
  ),
});
export const SuppressionBody = Type.Object({ email: Type.String(), reason: Type.String(), createdAt: Type.String() });
export const SuppressionPage = Type.Object({
  suppressions: Type.Array(SuppressionBody),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
});
export const SuppressionQuery = Type.Object({
  email: Type.Optional(Address('Only this address.')),
  limit: Type.Optional(PageLimit(1000, 100, 'Suppressions')),
  cursor: Type.Optional(PageCursor(400)),
});

/** ARCHITECTURE.md: `POST /email/complaints {arf}`, a feedback loop's report over HTTP. */
export const ComplaintRequest = Type.Object({
  arf: MultilineText({
    // Base64 of the largest report, with room for line breaks; BODY_LIMIT_BYTES caps the request first.
    maxLength: Math.ceil(MAX_REPORT_BYTES * 1.4),
    description:
      'An ARF feedback report (RFC 5965: multipart/report; report-type=feedback-report), the whole message ' +
      "in Base64 (line breaks allowed). It names its message by the original's VERP return path " +
      '(Original-Mail-From, or Return-Path of the original) or Message-ID.',
  }),
});
export const ComplaintRecorded = Type.Object(
  {
    event: Type.Literal('Spam Report'),
    repeated: Type.Boolean({
      description: 'The report was received before (by mail or here): nothing was recorded again.',
    }),
    feedbackType: Type.String({ description: "The report's Feedback-Type: abuse, fraud, virus or other." }),
    accountId: Type.String({ format: 'uuid', description: 'The account whose message it is.' }),
    batchId: Type.String({ format: 'uuid' }),
    messageId: Type.String({ format: 'uuid' }),
    email: Type.String({
      description: 'The recipient who complained: suppressed for the account, its contacts with emailOptIn false.',
    }),
  },
  { description: 'What the report recorded.' },
);

/** `?dryRun=true` on `/email/batch` (ARCHITECTURE.md, "Preflight"). */
export const EmailDryRunBody = Type.Object({
  dryRun: Type.Literal(true),
  recipients: DryRunRecipients,
  estimatedCost: Type.Array(Money, { description: 'Always empty: no route prices email.' }),
  preview: Type.Array(Type.Object({ email: Type.String(), subject: Type.String(), text: Type.String() })),
});
