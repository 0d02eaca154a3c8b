import { Type } from 'typebox';
import { Contact } from '../crm/schemas.ts';
import { Verification } from '../verify/schemas.ts';
import { PageCursor, Uuid } from '../http/schemas.ts';

/** The person asked about, by exactly one of `mobile` and `email` (the handler checks the "one"). */
const PersonFields = {
  mobile: Type.Optional(
    Type.String({
      pattern: '^[0-9]{4,18}$',
      description: 'The person by a mobile: country code and number, digits only. Not with email.',
      errorMessage: 'is the country code and number, digits only (4 to 18 of them)',
    }),
  ),
  email: Type.Optional(
    Type.String({ minLength: 1, maxLength: 254, description: 'The person by an email address. Not with mobile.' }),
  ),
};

/** `GET /privacy/export`. */
export const ExportQuery = Type.Object({ ...PersonFields, cursor: Type.Optional(PageCursor(40)) });

const IsoTime = Type.String({ format: 'date-time' });
const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);
const Text = Type.String();
const ContentState = Type.Union([Type.Literal('available'), Type.Literal('sealed'), Type.Literal('purged')], {
  description: 'available, sealed (isBodyEncrypted: never shown) or purged (retention); content null unless available.',
});
const Tags = Type.Union([Type.Record(Type.String(), Type.String()), Type.Null()], {
  description:
    "The tags that filled this recipient's text, as the request gave them; null when its content is not shown.",
});

/** A recipient's message as the send's read shows it, with its send's id, times and content. */
const Common = {
  messageId: Nullable(Text),
  status: Text,
  reason: Nullable(Text),
  dueAt: Nullable(IsoTime),
  createdAt: IsoTime,
  updatedAt: IsoTime,
  contentState: ContentState,
  tags: Tags,
};

const SmsMessage = Type.Object({
  queueId: Text,
  recipient: Text,
  ...Common,
  parts: Type.Union([Type.Integer(), Type.Null()]),
  encoding: Nullable(Text),
  error: Nullable(Text),
  errorCode: Nullable(Text),
  content: Type.Object({ senderName: Nullable(Text), body: Nullable(Text) }),
  history: Type.Array(Type.Object({ status: Text, at: IsoTime })),
});

const EmailMessage = Type.Object({
  batchId: Text,
  email: Text,
  ...Common,
  content: Type.Object({
    senderFrom: Nullable(Text),
    senderName: Nullable(Text),
    subject: Nullable(Text),
    preHeaderText: Nullable(Text),
    html: Nullable(Text),
  }),
  history: Type.Array(
    Type.Object({
      event: Text,
      at: IsoTime,
      url: Type.Optional(Text),
      reply: Type.Optional(Text),
      machine: Type.Optional(Type.Boolean()),
    }),
  ),
});

const Channel = Type.Union([Type.Literal('sms'), Type.Literal('email')]);

export const ExportPage = Type.Object({
  contacts: Type.Array(Contact, { description: "The account's contacts holding the person's numbers or addresses." }),
  lists: Type.Array(Type.Object({ listId: Text, name: Text }), { description: 'The lists those contacts are in.' }),
  sms: Type.Array(SmsMessage),
  email: Type.Array(EmailMessage),
  clicks: Type.Array(
    Type.Object({ channel: Channel, messageId: Nullable(Text), url: Text, at: IsoTime, userAgent: Nullable(Text) }),
    { description: "Clicks on the links made for this page's messages." },
  ),
  suppressions: Type.Array(Type.Object({ channel: Channel, address: Text, reason: Text, createdAt: IsoTime })),
  inbound: Type.Array(
    Type.Object({
      from: Text,
      to: Text,
      text: Text,
      at: IsoTime,
      contactId: Type.Union([Type.Integer(), Type.Null()]),
    }),
    { description: 'SMS replies from their numbers.' },
  ),
  verifications: Type.Array(Verification, { description: 'Verify codes sent to their numbers or addresses.' }),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
});

/** `POST /privacy/erasures`. */
export const ErasureRequest = Type.Object(PersonFields, { additionalProperties: false });

export const ErasureAccepted = Type.Object({ erasureId: Type.String({ format: 'uuid' }) });

export const ErasureParams = Type.Object({ erasureId: Uuid() });

/** `GET /privacy/erasures/{erasureId}`. */
export const ErasureBody = Type.Object({
  erasureId: Type.String({ format: 'uuid' }),
  status: Type.Union([Type.Literal('Processing'), Type.Literal('Completed'), Type.Literal('Failed')]),
  erased: Type.Object({ contacts: Type.Integer(), messages: Type.Integer() }),
  createdAt: IsoTime,
  completedAt: Type.Union([IsoTime, Type.Null()]),
});
