import { Type, type Static } from 'typebox';
import { MultilineText, PageCursor, PageLimit, Uuid as UuidField } from '../http/schemas.ts';
import { WebhookUrl } from '../webhooks/destination.ts';

/** SPEC §8: at most 1000 contacts a request. */
export const MAX_CONTACTS_PER_BATCH = 1000;

const Uuid = Type.String({ format: 'uuid' });
const IsoTime = Type.String({ format: 'date-time' });

// Fields that take more than one JSON type are left untyped here and checked by the
// service (validate.ts): ajv would report a union as one error line per branch, and the
// app's ajv runs in strict mode, which refuses `type` lists.
const OptIn = Type.Unsafe<unknown>({
  description: 'true, false, or blank ("" or null) for no opt-in status: kept on update, false on create.',
});
const Digits = Type.Unsafe<unknown>({ description: 'Digits only, as a string or a JSON number.' });

/** A property's name, as the spec spells the field (`propertyname`); `name`, a client's likely word, points to it. */
export const PropertyName = (options: { maxLength?: number; description?: string } = {}) =>
  Type.String({ ...options, 'x-also-called': ['name'] });

export const PropertyField = Type.Object(
  {
    propertyid: Type.Optional(UuidField({ description: 'Written by id when present.' })),
    propertyname: Type.Optional(
      PropertyName({ maxLength: 100, description: 'Written by name when there is no id; case-insensitive.' }),
    ),
    propertyvalue: MultilineText({ maxLength: 4000, description: 'May hold tabs and line breaks.' }),
  },
  { additionalProperties: false },
);

/** A contact's fields as the batch takes them (SPEC §2.6), and as PATCH /contacts/{contactId} does. */
const contactFields = {
  mobileCountryCode: Type.Optional(Digits),
  mobileNumber: Type.Optional(Digits),
  email: Type.Optional(Type.String({ maxLength: 254, description: 'May be empty when there is no email.' })),
  mobileOptIn: Type.Optional(OptIn),
  emailOptIn: Type.Optional(OptIn),
  propertyfields: Type.Optional(Type.Array(PropertyField, { maxItems: 100 })),
};

export const ContactInput = Type.Object(
  {
    contactId: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: Number.MAX_SAFE_INTEGER,
        description: 'Updates this contact, or creates it under this id.',
      }),
    ),
    ...contactFields,
  },
  { additionalProperties: false },
);
export type ContactInput = Static<typeof ContactInput>;

/**
 * PATCH /contacts/{contactId}: the batch's fields, checked by the batch's rules; what is absent
 * or blank keeps its value.
 */
export const ContactPatch = Type.Object(contactFields, { additionalProperties: false });
export type ContactPatch = Static<typeof ContactPatch>;

export const ContactBatchRequest = Type.Object({
  listId: Type.Optional(UuidField({ description: 'The list to add the contacts to; `All contacts` when absent.' })),
  createUpdateContacts: Type.Array(ContactInput, { minItems: 1, maxItems: MAX_CONTACTS_PER_BATCH }),
  webhookUrl: Type.Optional(WebhookUrl('Receives one signed post when the batch is applied.')),
});
export type ContactBatchRequest = Static<typeof ContactBatchRequest>;

/** SPEC §2.6, exactly. */
export const ContactBatchAccepted = Type.Object({
  status: Type.Literal('Success'),
  message: Type.String(),
  data: Type.Object({
    BatchId: Uuid,
    Processed: Type.Null(),
    ContactId: Type.Null(),
    InvalidProperties: Type.Array(Type.String()),
    InvalidContactIds: Type.Array(Type.Integer()),
  }),
});

const Outcome = Type.Object({ count: Type.Integer(), contactIds: Type.Array(Type.Integer()) });

export const BatchStatus = Type.Object({
  batchId: Uuid,
  status: Type.Union([
    Type.Literal('Queued'),
    Type.Literal('Processing'),
    Type.Literal('Completed'),
    Type.Literal('Failed'),
  ]),
  listId: Uuid,
  contacts: Type.Integer({ description: 'Entries in the request.' }),
  inserted: Type.Union([Outcome, Type.Null()]),
  updated: Type.Union([Outcome, Type.Null()]),
  skipped: Type.Union([Outcome, Type.Null()], {
    description: 'Existing contacts the batch left exactly as they were.',
  }),
  error: Type.Union([Type.String(), Type.Null()]),
  retrying: Type.Union(
    [
      Type.Object({
        failedAttempts: Type.Integer(),
        maxAttempts: Type.Integer(),
        lastError: Type.String(),
        nextAttemptAt: IsoTime,
      }),
      Type.Null(),
    ],
    {
      description:
        'A queued batch whose job failed and will be tried again: how often, why, and when next; null otherwise.',
    },
  ),
  createdAt: IsoTime,
  completedAt: Type.Union([IsoTime, Type.Null()]),
});

export const Contact = Type.Object({
  contactId: Type.Integer(),
  email: Type.Union([Type.String(), Type.Null()]),
  mobileCountryCode: Type.Union([Type.String(), Type.Null()]),
  mobileNumber: Type.Union([Type.String(), Type.Null()]),
  mobileOptIn: Type.Boolean(),
  emailOptIn: Type.Boolean(),
  propertyfields: Type.Array(
    Type.Object({ propertyid: Uuid, propertyname: Type.String(), propertyvalue: Type.String() }),
  ),
  listIds: Type.Array(Uuid),
  createdAt: IsoTime,
  updatedAt: IsoTime,
});

export const ContactIdParams = Type.Object({
  contactId: Type.String({
    pattern: '^[1-9][0-9]{0,15}$',
    errorMessage: 'must be a contact id: a whole number from 1, at most 16 digits',
  }),
});
export const BatchIdParams = Type.Object({ batchId: UuidField() });
export const ListIdParams = Type.Object({ listId: UuidField() });

// Query strings arrive as text and the app's validator does not coerce, so numbers are patterns.
export const ContactSearch = Type.Object({
  email: Type.Optional(Type.String({ minLength: 1, maxLength: 254 })),
  mobile: Type.Optional(
    Type.String({
      pattern: '^[0-9]{4,18}$',
      description: 'Country code and number, digits only.',
      errorMessage: 'is the country code and number, digits only (4 to 18 of them)',
    }),
  ),
});
export const Page = Type.Object({
  limit: Type.Optional(PageLimit(1000, 100, 'Contacts')),
  cursor: Type.Optional(PageCursor(40)),
});

/** POST /lists/{listId}/contacts: as many contacts as a batch takes. */
export const ListMembersBody = Type.Object(
  {
    contactIds: Type.Array(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }), {
      minItems: 1,
      maxItems: MAX_CONTACTS_PER_BATCH,
      description: 'Contacts of the account to add to the list, at most 1000.',
    }),
  },
  { additionalProperties: false },
);
export const ListMembersAdded = Type.Object({
  listId: Uuid,
  added: Type.Integer({ description: 'Contacts that were not in the list before.' }),
});
export const ListMemberParams = Type.Object({
  listId: UuidField(),
  contactId: ContactIdParams.properties.contactId,
});

export const ListBody = Type.Object({ listId: Uuid, name: Type.String(), createdAt: IsoTime });
export const PropertyBody = Type.Object({ propertyid: Uuid, propertyname: Type.String() });
