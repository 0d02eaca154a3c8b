import { Type, type Static } from 'typebox';
import { MultilineText, Uuid } from '../http/schemas.ts';
import { DeliverInRecipientTimeZone, DryRunRecipients, Money } from '../messaging/schemas.ts';
import { WebhookUrl } from '../webhooks/destination.ts';
import { MAX_PARTS } from './segments.ts';

/**
 * SPEC §2.1–2.5, field names to the letter (`webHookUrl`, `shortner`, `shortnerUrl`). What
 * the schema cannot say in one error line (digits that may come as a string or a number,
 * RFC 3339 without an offset, sender names, tag names) is checked by validate.ts.
 */

/** The most recipients one `/sms/batch` names itself, as for contacts and emails (SPEC §8); more go through lists. */
export const MAX_SMS_RECIPIENTS = 1000;
/** Lists one `/sms/batch` sends to. */
export const MAX_SMS_LISTS = 100;
/** Tags one recipient (or a single SMS) carries. */
export const MAX_TAGS = 100;

// The spec's type is "number (digits)": a JSON number loses digits past 2^53 and cannot hold
// a leading zero, while clients write phone numbers as strings, so both are taken, a string
// of digits or a JSON whole number; anything else is refused in words by validate.ts. Left
// untyped here for the reason given in crm/schemas.ts: a union reads as one error per branch.
const MobileDigits = Type.Unsafe<string | number>({
  description: 'Country code then number, digits only (447400123456): a string, or a JSON whole number.',
});

export const SubstitutionTag = Type.Object({
  tagName: Type.String({
    maxLength: 66,
    description: 'The placeholder as written in the text, in square brackets: [firstName].',
  }),
  tagValue: MultilineText({ maxLength: 1000, description: 'Replacement text; may hold line breaks.' }),
});
const Tags = (description: string) => Type.Array(SubstitutionTag, { maxItems: MAX_TAGS, description });

export const Shortener = Type.Object(
  {
    shortnerUrl: Type.Optional(
      Type.String({
        maxLength: 2048,
        description:
          'https://<domain> (or http://), the domain a shortener domain the operator registered for the ' +
          "account; the service's own PUBLIC_URL/l when absent.",
      }),
    ),
    isUniqueUrl: Type.Optional(
      Type.Boolean({
        description:
          'One link per recipient, its clicks shown on the recipient; true by default. False: one link for ' +
          'the send, its clicks counted on the send.',
      }),
    ),
  },
  { description: 'How the landing page link is shortened; only with landingPageId.' },
);

const common = {
  senderName: Type.String({
    maxLength: 15,
    description:
      "One of the account's sender names, or the service's default: 1 to 11 letters, digits or spaces with a " +
      'letter, or 3 to 15 digits.',
  }),
  // A text of more characters than this cannot fit MAX_PARTS parts in any encoding.
  body: MultilineText({
    maxLength: MAX_PARTS * 160,
    description: 'The SMS text; may contain substitution tags such as [firstName].',
  }),
  isBodyEncrypted: Type.Optional(
    Type.Boolean({ description: 'Keep the body encrypted at rest (a passcode); false by default.' }),
  ),
  scheduleDateTime: Type.Optional(
    Type.String({
      maxLength: 40,
      description:
        "RFC 3339 (2026-11-23T14:00:00+05:30): with an offset an instant; without one, read in the account's " +
        'time zone. Absent or past: now.',
    }),
  ),
  landingPageId: Type.Optional(
    Uuid({
      description:
        'Adds a short link to this landing page to the text: where the body writes [landingPageUrl], else at ' +
        'its end after a space.',
    }),
  ),
  shortner: Type.Optional(Shortener),
  webHookUrl: Type.Optional(
    WebhookUrl('Receives the delivery statuses (Submitted, Processed, Delivered, Failed), signed.'),
  ),
};

/** SPEC §2.1. */
export const SmsSingleRequest = Type.Object({
  recipient: MobileDigits,
  ...common,
  personalizationSubstitutionTags: Type.Optional(Tags('Values of the tags in the text.')),
});
export type SmsSingleRequest = Static<typeof SmsSingleRequest>;

export const SmsBatchRecipient = Type.Object({
  mobileNo: MobileDigits,
  personalizationSubstitutionTags: Type.Optional(
    Tags("This recipient's tag values; they win over the data of a list's contact."),
  ),
});

/** SPEC §2.2. */
export const SmsBatchRequest = Type.Object({
  listId: Type.Optional(
    Type.Array(Uuid(), {
      maxItems: MAX_SMS_LISTS,
      description: 'Lists whose contacts (with mobileOptIn true) receive the text.',
    }),
  ),
  recipients: Type.Optional(
    Type.Array(SmsBatchRecipient, {
      maxItems: MAX_SMS_RECIPIENTS,
      description: 'Recipients named in the request; a number given twice gets one message, with its first entry.',
    }),
  ),
  ...common,
  deliverInRecipientTimeZone: Type.Optional(DeliverInRecipientTimeZone),
});
export type SmsBatchRequest = Static<typeof SmsBatchRequest>;

export type SmsRequest = SmsSingleRequest | SmsBatchRequest;

/** SPEC §2.5, exactly. */
export const SmsAccepted = Type.Object({
  status: Type.Literal('Success'),
  message: Type.String(),
  data: Type.Object({
    QueueId: Type.String({ format: 'uuid' }),
    QueuedTimestamp: Type.Integer({ description: 'Epoch milliseconds.' }),
  }),
});

/** `?dryRun=true` on `/sms/single` and `/sms/batch` (ARCHITECTURE.md, "Preflight"). */
export const SmsDryRunBody = Type.Object({
  dryRun: Type.Literal(true),
  recipients: DryRunRecipients,
  parts: Type.Integer({ description: 'Billed parts of the messages that will be sent.' }),
  encoding: Type.Object(
    { 'GSM-7': Type.Integer(), 'UCS-2': Type.Integer() },
    { description: 'Messages per encoding.' },
  ),
  estimatedCost: Type.Array(Money),
  preview: Type.Array(
    Type.Object({
      recipient: Type.String(),
      text: Type.String(),
      parts: Type.Integer(),
      encoding: Type.String(),
      replacedCharacters: Type.Integer(),
    }),
  ),
});
