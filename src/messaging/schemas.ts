import { Type } from 'typebox';
import { PageCursor, PageLimit } from '../http/schemas.ts';
import type { Channel } from './recipients.ts';

const Totals = Type.Record(Type.String(), Type.Integer(), {
  description: "Recipients by status word, as the send's own read counts them.",
});

/** A page of the account's sends, newest first: `GET /sms` (`queueId`) and `GET /email/batch` (`batchId`). */
export const SendListPage = (idName: 'queueId' | 'batchId') =>
  Type.Object({
    [idName === 'queueId' ? 'sends' : 'batches']: Type.Array(
      Type.Object({
        [idName]: Type.String({ format: 'uuid' }),
        createdAt: Type.String({ format: 'date-time' }),
        scheduledAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
        status: Type.String({ description: 'Queued, Scheduled, Cancelled, Sending or Completed.' }),
        totals: Totals,
      }),
    ),
    nextCursor: Type.Union([Type.String(), Type.Null()]),
  });

/** A cursor of the listing: the last send's time and id (up to 70 characters). */
export const SendListQuery = Type.Object({
  limit: Type.Optional(PageLimit(100, 20, 'Sends')),
  cursor: Type.Optional(PageCursor(100)),
});

/** ARCHITECTURE.md's recipient status words by channel, as reads show them. */
const RECIPIENT_WORDS: Record<Channel, string[]> = {
  sms: ['Scheduled', 'Queued', 'Cancelled', 'Submitted', 'Processed', 'Delivered', 'Failed', 'NotSent'],
  email: ['Scheduled', 'Queued', 'Cancelled', 'Processed', 'Dropped', 'Deferred', 'Bounce', 'Delivered'],
};

/** `?status=` of a send's read: only the recipients at this word. */
export const RecipientStatus = (channel: Channel) =>
  Type.Union(
    RECIPIENT_WORDS[channel].map((word) => Type.Literal(word)),
    {
      errorMessage: `must be one of ${RECIPIENT_WORDS[channel].join(', ')}`,
      description: 'Only the recipients at this status word.',
    },
  );

const LocalDate = (description: string) =>
  Type.String({ pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$', errorMessage: 'must be a date YYYY-MM-DD', description });

/** The span of `GET /usage` and `GET /stats`: whole days of the account's timeZoneOffset, both included. */
const Span = {
  from: LocalDate("The first day, in the account's timeZoneOffset."),
  to: LocalDate("The last day, included, in the account's timeZoneOffset."),
};

export const UsageQuery = Type.Object({
  ...Span,
  format: Type.Optional(
    Type.Union([Type.Literal('json'), Type.Literal('csv')], {
      errorMessage: 'must be json or csv',
      description: 'csv: the days as a text/csv download, a row each, for a spreadsheet.',
    }),
  ),
});

/** Money (ARCHITECTURE.md): a decimal string and its ISO 4217 currency. */
export const Money = Type.Object({ amount: Type.String(), currency: Type.String() });

const Count = Type.Integer({ minimum: 0 });
const Statuses = Type.Record(Type.String(), Count, {
  description: 'Messages that reached each status word that day (each Open and Click counted).',
});
const Usage = {
  sms: Type.Object({
    messages: Type.Integer({ description: 'SMS the operator accepted (Submitted): billed.' }),
    parts: Type.Object(
      { gsm7: Count, ucs2: Count },
      { description: 'Their parts, each billed as a message (SPEC §8), by encoding.' },
    ),
    statuses: Statuses,
  }),
  email: Type.Object({
    messages: Type.Integer({ description: 'Emails handed over for sending (Processed): billed.' }),
    statuses: Statuses,
  }),
  cost: Type.Array(Money, {
    description: "What the SMS Submitted cost by their routes' prices at submit, one entry a currency",
  }),
};

export const UsageBody = Type.Object({
  from: Type.String(),
  to: Type.String(),
  days: Type.Array(Type.Object({ date: Type.String(), ...Usage })),
  totals: Type.Object(Usage),
});

export const StatsQuery = Type.Object({
  ...Span,
  channel: Type.Union([Type.Literal('sms'), Type.Literal('email')], { errorMessage: 'must be sms or email' }),
  interval: Type.Optional(
    Type.Union([Type.Literal('hour'), Type.Literal('day')], {
      errorMessage: 'must be hour or day',
      description: 'day by default; hour spans at most 31 days.',
    }),
  ),
});

export const StatsBody = Type.Object({
  channel: Type.String(),
  interval: Type.String(),
  from: Type.String(),
  to: Type.String(),
  points: Type.Array(
    Type.Object({
      start: Type.String({
        format: 'date-time',
        description: "The hour's or day's first instant (the account's local midnight for a day), in UTC.",
      }),
      sent: Type.Integer({ description: 'SMS: Submitted; email: Processed.' }),
      delivered: Count,
      failed: Type.Integer({ description: 'SMS: Failed; email: Bounce.' }),
      refused: Type.Integer({ description: 'Not sent for consent or suppression: SMS NotSent, email Dropped.' }),
      opened: Type.Integer({ description: 'Email Open events (0 for SMS).' }),
      clicked: Type.Integer({ description: 'Email Click events (0 for SMS).' }),
      unsubscribed: Count,
      complaints: Type.Integer({ description: 'Spam Report events.' }),
    }),
  ),
});

export const ContactMessagesQuery = Type.Object({
  limit: Type.Optional(PageLimit(100, 20, 'Messages')),
  cursor: Type.Optional(PageCursor(40)),
});

export const ContactMessagesPage = Type.Object({
  messages: Type.Array(
    Type.Object({
      channel: Type.Union([Type.Literal('sms'), Type.Literal('email')]),
      sendId: Type.String({ format: 'uuid', description: 'The queueId (SMS) or batchId (email).' }),
      messageId: Type.Union([Type.String(), Type.Null()]),
      address: Type.String({ description: "The number or email address it went to: the contact's as they are now." }),
      status: Type.String(),
      reason: Type.Union([Type.String(), Type.Null()]),
      sentAt: Type.String({ format: 'date-time', description: 'When its send was accepted.' }),
      updatedAt: Type.String({ format: 'date-time', description: 'When its status last changed.' }),
    }),
  ),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
});

const IsoTime = Type.String({ format: 'date-time' });

/**
 * `GET /messages/{messageId}` (ARCHITECTURE.md, "Data rights and management"): one recipient's
 * message, its send's id and its history as that send's read shows them, by channel.
 */
export const MessageBody = Type.Union([
  Type.Object({
    channel: Type.Literal('sms'),
    queueId: Type.String({ format: 'uuid' }),
    messageId: Type.String(),
    recipient: Type.String({ description: 'The number, country code first, digits only.' }),
    status: Type.String(),
    reason: Type.Union([Type.String(), Type.Null()]),
    history: Type.Array(Type.Object({ status: Type.String(), at: IsoTime })),
  }),
  Type.Object({
    channel: Type.Literal('email'),
    batchId: Type.String({ format: 'uuid' }),
    messageId: Type.String(),
    email: Type.String(),
    status: Type.String(),
    reason: Type.Union([Type.String(), Type.Null()]),
    history: Type.Array(
      Type.Object({
        event: Type.String(),
        at: IsoTime,
        url: Type.Optional(Type.String()),
        reply: Type.Optional(Type.String()),
        machine: Type.Optional(Type.Boolean()),
      }),
    ),
  }),
]);

/** `?dryRun=true` and `?preview=N` (ARCHITECTURE.md, "Preflight") on the routes that send. */
export const DryRunQuery = Type.Object({
  dryRun: Type.Optional(
    Type.Union([Type.Literal('true'), Type.Literal('false')], { errorMessage: 'must be true or false' }),
  ),
  preview: Type.Optional(
    Type.String({ pattern: '^([1-9][0-9]?|100)$', errorMessage: 'must be 1 to 100: the recipients to preview' }),
  ),
});

/** The recipients of a dry run: `willSend` and the three `notSent` counts add up to `total`. */
export const DryRunRecipients = Type.Object({
  total: Count,
  willSend: Count,
  notSent: Type.Object({ noConsent: Count, suppressed: Count, duplicate: Count }),
});

/** How many recipients a dry run previews unless `preview` says. */
export const DEFAULT_PREVIEW = 10;

/** deliverInRecipientTimeZone (ARCHITECTURE.md, "Preflight") beside a scheduleDateTime without an offset. */
export const DeliverInRecipientTimeZone = Type.Boolean({
  description:
    "Deliver at scheduleDateTime (no offset) on each recipient's clock: its contact's timeZone property, " +
    "else its number's country when that has one zone, else the account's offset.",
});
