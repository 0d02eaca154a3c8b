import type { ColumnType, Generated } from 'kysely';

/**
 * Table types for Kysely. Times are epoch milliseconds in a BIGINT on both databases:
 * one representation, no time-zone conversions, and exact ordering.
 * Booleans are INTEGER 0/1 on SQLite and BOOLEAN on PostgreSQL; read them through Boolean().
 */
export interface SettingsTable {
  key: string;
  value: string;
}

export interface AccountsTable {
  id: string;
  user_name: string;
  /** user_name lower-cased: login names are unique case-insensitively. */
  user_name_key: string;
  password_hash: string;
  /** SHA-256 (hex) of the private token, lower-cased (auth/credentials.ts): the token itself is shown once. */
  private_token_hash: string;
  /** Bumped on password change and private-token rotation; tokens carry it and die with it. */
  token_version: Generated<number>;
  time_zone_offset: string;
  locale: string;
  /** JSON object of requests per minute by endpoint group, overriding the defaults; null = defaults. */
  rate_limits: string | null;
  /** Where MO messages are posted (src/sms/inbound.ts); null: not posted. */
  inbound_sms_webhook_url: ColumnType<string | null, string | null | undefined, string | null>;
  /** Verify's fraud guard as PATCH /account gave it (accounts/verify-settings.ts), JSON; null = defaults (0032). */
  verify: ColumnType<string | null, string | null | undefined, string | null>;
  /** Smart encoding (sms/smart-encoding.ts): on for accounts made since 0033 (the default), off for those before. */
  smart_encoding: ColumnType<boolean | number, boolean | undefined, boolean>;
  /** Quiet hours as PATCH /account gave them (accounts/quiet-hours.ts), JSON {start, end}; null = off (0034). */
  quiet_hours: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: number;
  updated_at: number;
}

export interface SenderNamesTable {
  account_id: string;
  name: string;
  created_at: number;
}

export interface SenderDomainsTable {
  account_id: string;
  domain: string;
  created_at: number;
}

/** A sender domain's DKIM key (migration 0020): an account's, or the service domain's when account_id is null. */
export interface DkimKeysTable {
  domain: string;
  selector: string;
  account_id: string | null;
  /** PKCS#8 PEM, sealed (sealed.ts). */
  private_key: string;
  /** Base64 DER SubjectPublicKeyInfo: the record's p=. */
  public_key: string;
  created_at: number;
  /** Null for the active key, which signs; the time a rotation replaced it otherwise. */
  retired_at: number | null;
}

export interface IdempotencyKeysTable {
  scope: string;
  key: string;
  request_hash: string;
  status_code: number;
  response_body: string;
  created_at: number;
}

export type JobState = 'ready' | 'running' | 'dead';

export interface JobsTable {
  id: Generated<number>;
  kind: string;
  account_id: string | null;
  /** JSON. */
  payload: string;
  state: JobState;
  /**
   * Runs whose outcome was the handler's own: claims so far, the one running included, less snoozes
   * and lapsed leases.
   */
  attempts: Generated<number>;
  max_attempts: number;
  run_at: number;
  /** The worker holding the lease while running. */
  leased_by: string | null;
  /** Fresh per claim: what completes, fails or extends the job (a lapsed claim's token no longer matches). */
  lease_token: string | null;
  /** Epoch ms by the database's clock. */
  lease_expires_at: number | null;
  /** Leases that lapsed: the job's worker died or hung. */
  lapses: Generated<number>;
  /** Its lane: lower is claimed first (PRIORITY in src/queue/queue.ts). */
  priority: number;
  /** Unique: enqueueing a key that is already queued adds nothing, and a handler can tell a rerun. */
  idempotency_key: string;
  last_error: string | null;
  created_at: number;
  /** When a dead job gave up. */
  finished_at: number | null;
}

/**
 * An account's webhook secrets: `whsec_` + Base64 of the key (Standard Webhooks' secret
 * format), sealed (webhooks/secrets.ts). Each has a clear column beside its sealed one, set only
 * by the code before migration 0027, or by a process still on it during a rolling upgrade:
 * such a value is the newer, and the next start seals it and empties its clear column.
 */
export interface WebhookSecretsTable {
  account_id: string;
  sealed_secret: string | null;
  /** The secret the last rotation replaced, which signs beside the new one until previous_expires_at. */
  sealed_previous_secret: string | null;
  secret: ColumnType<string | null, string | null | undefined, string | null>;
  previous_secret: ColumnType<string | null, string | null | undefined, string | null>;
  previous_expires_at: number | null;
  created_at: number;
  rotated_at: number | null;
}

export type WebhookDeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface WebhookDeliveriesTable {
  /** Also the `webhook-id` header: the same on every attempt of the event. */
  id: string;
  account_id: string;
  type: string;
  url: string;
  /** The JSON body exactly as posted. */
  payload: string;
  status: WebhookDeliveryStatus;
  attempts: Generated<number>;
  /** Bumped by a replay; a delivery job of an older generation stands down. */
  generation: Generated<number>;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: number | null;
  next_attempt_at: number | null;
  created_at: number;
  delivered_at: number | null;
}

/** One append's events, waiting to be gathered into posts to the account's URL (src/webhooks/events.ts). */
export interface WebhookEventsTable {
  /** Append order. */
  id: Generated<number>;
  account_id: string;
  type: string;
  url: string;
  /** JSON array of the events not yet gathered, in the order appended. */
  events: string;
  event_count: number;
  created_at: number;
}

export interface ContactListsTable {
  id: string;
  account_id: string;
  name: string;
  /** name lower-cased: list names are unique per account case-insensitively. */
  name_key: string;
  /** The account's `All contacts`: every contact of the account, with no list_members rows. */
  is_default: Generated<boolean | number>;
  created_at: number;
}

export interface ContactPropertiesTable {
  id: string;
  account_id: string;
  name: string;
  name_key: string;
  created_at: number;
}

export interface ContactsTable {
  /** The contactId, numbered per account: the key is (account_id, id). */
  id: number;
  account_id: string;
  /** Lower-cased. */
  email: string | null;
  /** E.164 digits: country code then national number. */
  mobile: string | null;
  mobile_country_code: string | null;
  mobile_opt_in: boolean | number;
  email_opt_in: boolean | number;
  /** JSON object {propertyid: value}. */
  properties: string;
  created_at: number;
  updated_at: number;
}

/** Per account, the last contactId Herald handed out (a client may also choose ids). */
export interface ContactIdCountersTable {
  account_id: string;
  last_value: number;
}

export interface ListMembersTable {
  list_id: string;
  contact_id: number;
  added_at: number;
}

export type ContactBatchStatus = 'Queued' | 'Processing' | 'Completed' | 'Failed';

export interface ContactBatchesTable {
  id: string;
  account_id: string;
  list_id: string;
  webhook_url: string | null;
  status: ContactBatchStatus;
  contact_count: number;
  /** JSON arrays of contact ids, set when the batch is applied. */
  inserted_ids: string | null;
  updated_ids: string | null;
  skipped_ids: string | null;
  error: string | null;
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
  /** The order it was accepted in, the database's: recordBatch gives crm/queries.ts's NEXT_ACCEPT_ORDER. */
  accept_order: Generated<number>;
}

export type SendStatus = 'Queued' | 'Scheduled' | 'Cancelled' | 'Sending' | 'Completed';

export interface SendsTable {
  id: string;
  account_id: string;
  channel: 'sms' | 'email';
  status: SendStatus;
  /** JSON: the channel's request as accepted. */
  content: string;
  /** JSON array of list ids. */
  list_ids: string;
  webhook_url: string | null;
  scheduled_at: number | null;
  expanded: Generated<boolean | number>;
  /** The last address the expansion covered so far (it goes a range at a time). */
  expanded_through: Generated<string | null>;
  /** The last recipient id handled. */
  cursor: Generated<number>;
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
  /** When its bodies, tags and sandbox records were purged (src/messaging/retention.ts); null until then. */
  purged_at: ColumnType<number | null, number | null | undefined, number | null>;
}

export interface SendRecipientsTable {
  id: Generated<number>;
  send_id: string;
  address: string;
  contact_id: number | null;
  /** JSON object {tagName: value}: the request's own tags for this recipient. */
  tags: string | null;
  status: string;
  reason: string | null;
  message_id: string | null;
  parts: number | null;
  encoding: string | null;
  error: string | null;
  /** SMS: the operator's error code of a Failed message (a receipt's `err:`, an SMPP command_status), null for none. */
  error_code: ColumnType<string | null, string | null | undefined, string | null>;
  updated_at: number;
  /** Email: times the message was refused for now (Deferred). */
  attempts: Generated<number>;
  /** Whether its email tokens sign its send: true for rows written since 0042 (email/token-recipients.ts). */
  bound_tokens: Generated<boolean | number>;
  /** Email, while Deferred: when it is tried again (epoch ms). */
  retry_at: ColumnType<number | null, number | null | undefined, number | null>;
  /** Email: when it was first refused for now (epoch ms), from which it is given up after 72 hours. */
  deferred_at: ColumnType<number | null, number | null | undefined, number | null>;
  /** SMS: the connection that took its (last) part (sms/routing/). */
  smsc: ColumnType<string | null, string | null | undefined, string | null>;
  /** SMS: parts × its route's price per part at submit, in micro-units of `currency`; null for no price. */
  price_micros: ColumnType<number | null, number | null | undefined, number | null>;
  currency: ColumnType<string | null, string | null | undefined, string | null>;
  /** SMS: characters smart encoding replaced in its message (0033); null before it was sent. */
  replaced_characters: ColumnType<number | null, number | null | undefined, number | null>;
  /**
   * SMS held by quiet hours: when the window ends (epoch ms), set while it waits Queued, with
   * `reason` 'quiet hours' (0034); null otherwise. Read only while its status is Queued.
   */
  due_at: ColumnType<number | null, number | null | undefined, number | null>;
}

export interface RecipientHistoryTable {
  recipient_id: number;
  status: string;
  at: number;
  /** Email: a Click's URL. */
  url: ColumnType<string | null, string | null | undefined, string | null>;
  /** Email: the SMTP reply of a Deferred or Bounce. */
  reply: ColumnType<string | null, string | null | undefined, string | null>;
  /** Email: an Open or Click that looks like a machine's (docs/email.md, "Sending": tracking). */
  machine: ColumnType<boolean | number | null, boolean | null | undefined, boolean | null>;
}

export interface EmailCampaignsTable {
  id: string;
  account_id: string;
  name: string;
  /** name lower-cased: names are unique per account case-insensitively. */
  name_key: string;
  html: string;
  created_at: number;
}

export interface SandboxEmailTable {
  id: Generated<number>;
  account_id: string;
  send_id: string;
  message_id: string;
  recipient: string;
  /** The message as raw MIME; sealed for a Verify code, which the account's read opens (`opens`, 0032). */
  raw: string;
  opens: Generated<boolean | number>;
  created_at: number;
}

export interface SmsPartsTable {
  recipient_id: number;
  part: number;
  operator_message_id: string;
  status: string;
  /** The SMSC connection that took the part (smsc_connections, or `default`). */
  smsc: ColumnType<string, string | undefined, string>;
  /** When it was submitted (epoch ms): a receipt kept long before then is not its own. Null for older parts. */
  submitted_at: ColumnType<number | null, number | null | undefined, number | null>;
}

/** An SMSC connection added through the admin API (src/sms/routing/connections.ts). */
export interface SmscConnectionsTable {
  name: string;
  /** The URL as shown: its password replaced by ***. */
  url: string;
  /** The whole URL, sealed under ENCRYPTION_KEY. */
  sealed_url: string;
  created_at: number;
}

/** One row of the SMS routing table (src/sms/routing/table.ts). */
export interface SmsRoutesTable {
  /** The row's place in the table as PUT gave it. */
  position: number;
  /** null: a route for every account. */
  account_id: string | null;
  /** Leading E.164 digits; "" matches every number. */
  prefix: string;
  /** JSON list of connection names, in the order a part tries them. */
  smsc: string;
  /** Price of one part in micro-units of `currency`, or null for none. */
  price_micros: number | null;
  currency: string | null;
}

/** A worker process's binds up on one connection, as it last wrote them. */
export interface SmscBindsTable {
  process: string;
  smsc: string;
  binds: number;
  seen_at: number;
}

export interface SmsReceiptsTable {
  /** The connection the receipt came over: it matches a part that connection took. */
  smsc: string;
  operator_message_id: string;
  status: string;
  error_code: string | null;
  at: number;
  /** The number the receipt reports on, when its transport names one: it matches a part of that number only. */
  recipient: string | null;
}

export interface SmppSubmitsTable {
  send_id: string;
  recipient: string;
  part: number;
  parts: number;
  operator_message_id: string;
  at: number;
  /** The SMSC connection that took the part. */
  smsc: ColumnType<string, string | undefined, string>;
}

/** A message from a handset (MO), routed to the account (src/sms/inbound.ts). */
export interface SmsInboundTable {
  id: Generated<number>;
  account_id: string;
  /** The handset's number. */
  sender: string;
  /** The number or name it wrote to. */
  destination: string;
  text: string;
  contact_id: number | null;
  received_at: number;
}

export interface SuppressionsTable {
  account_id: string;
  channel: 'sms' | 'email';
  address: string;
  reason: string;
  created_at: number;
}

export interface SandboxSmsTable {
  id: Generated<number>;
  account_id: string;
  send_id: string;
  message_id: string;
  recipient: string;
  sender: string;
  part: number;
  parts: number;
  encoding: string;
  /** The part's text; sealed (messaging/sealed.ts) when `sealed`, for an isBodyEncrypted send. */
  text: string;
  sealed: Generated<boolean | number>;
  /** A code Herald made (Verify): the sandbox's read opens it for its account (0032). */
  opens: Generated<boolean | number>;
  created_at: number;
}

export interface LandingPagesTable {
  id: string;
  account_id: string;
  name: string;
  /** name lower-cased: names are unique per account case-insensitively. */
  name_key: string;
  url: string;
  created_at: number;
}

export interface ShortenerDomainsTable {
  domain: string;
  account_id: string;
  created_at: number;
}

export interface LinksTable {
  /** The short link's code: 8 random base62 characters. */
  code: string;
  account_id: string;
  send_id: string;
  /** The recipient the link was made for; null when the send's recipients share one. */
  recipient_id: number | null;
  /** Where the link leads. */
  url: string;
  created_at: number;
}

export interface LinkClicksTable {
  id: Generated<number>;
  code: string;
  at: number;
  user_agent: string | null;
}

/**
 * Messages that reached a status word, per account, channel and quarter-hour (migration 0023,
 * src/messaging/rollup.ts): what `GET /stats` and `GET /usage` sum.
 */
export interface UsageRollupTable {
  account_id: string;
  channel: 'sms' | 'email';
  /** Epoch ms / 900,000: the quarter-hour, the finest step of an account's offset. */
  bucket: number;
  status: string;
  /** SMS: GSM-7 or UCS-2; '' for none (email, a message never rendered). */
  encoding: string;
  /** The currency of `cost_micros` (ISO 4217); '' for none. */
  currency: ColumnType<string, string | undefined, string>;
  messages: number;
  parts: number;
  /** SMS Submitted: what the messages cost, by the price of their route at submit, in micro-units. */
  cost_micros: ColumnType<number, number | undefined, number>;
}

/** A transaction's counts not yet folded into usage_rollup (0024). */
export interface UsageDeltasTable extends UsageRollupTable {
  id: Generated<number>;
}

/** A console sign-in (0025): the cookie holds the secret whose hash is the key. */
export interface ConsoleSessionsTable {
  id_hash: string;
  account_id: string;
  token_version: number;
  created_at: number;
  expires_at: number;
}

/** A verification (0032): its code kept only as a keyed hash (verify/codes.ts). */
export interface VerificationsTable {
  id: string;
  account_id: string;
  channel: 'sms' | 'email';
  recipient: string;
  country: string;
  prefix: string;
  code_hash: string;
  status: 'pending' | 'approved' | 'failed' | 'expired' | 'cancelled';
  attempts_left: number;
  send_attempts: number;
  last_sent_at: number;
  expires_at: number;
  webhook_url: string | null;
  created_at: number;
  ended_at: number | null;
}

/** Each code sent, for the limit of sends per number (0032). */
export interface VerificationSendsTable {
  id: Generated<number>;
  account_id: string;
  recipient: string;
  at: number;
}

/** An attempt the fraud guard refused (0032). */
export interface VerifyBlockedTable {
  id: Generated<number>;
  account_id: string;
  reason: 'country' | 'prefix';
  country: string;
  at: number;
}

/** Verify's counts of what retention purged (0032), per quarter-hour bucket and country. */
export interface VerifyRollupTable {
  account_id: string;
  bucket: number;
  country: string;
  started: number;
  approved: number;
  failed: number;
  expired: number;
  blocked_country: number;
  blocked_prefix: number;
}

/** An erasure of one person's data (0036, privacy/erasures.ts). */
export interface ErasuresTable {
  id: string;
  account_id: string;
  status: 'Processing' | 'Completed' | 'Failed';
  /** Who asked: `token`, `console` or `apiKey:<apiKeyId>`. */
  requested_by: string;
  /** JSON array of the erased identifiers' keyed hashes. */
  hashes: string;
  /** JSON {mobiles, emails} sealed under ENCRYPTION_KEY while the job runs; null once done. */
  sealed_identifiers: string | null;
  contacts: Generated<number>;
  messages: Generated<number>;
  created_at: number;
  completed_at: number | null;
}

/** The suppression of an erased person: the keyed hash of their number or address (0036). */
export interface ErasedSuppressionsTable {
  account_id: string;
  channel: 'sms' | 'email';
  hash: string;
  reason: string;
  created_at: number;
}

/** An account's API key (0037), kept as the SHA-256 of the key (auth/api-keys.ts). */
export interface ApiKeysTable {
  id: string;
  account_id: string;
  name: string;
  /** JSON array of scopes. */
  scopes: string;
  key_hash: string;
  created_at: number;
  expires_at: number | null;
  last_used_at: number | null;
}

/** An account-wide webhook endpoint (0038, webhooks/endpoints.ts). */
export interface WebhookEndpointsTable {
  id: string;
  account_id: string;
  /** Normalised: scheme and host in lower case, no default port. */
  url: string;
  /** JSON array of event types. */
  events: string;
  created_at: number;
  /** When its receiver answered 410 Gone: no event goes there since; null while it takes them (0045). */
  disabled_at: number | null;
}

/** The audit log (src/audit/): one row per change, written in its transaction. */
export interface AuditEntriesTable {
  id: Generated<number>;
  account_id: string;
  at: number;
  /** `token`, `apiKey:<apiKeyId>`, `console` or `admin`. */
  actor: string;
  action: string;
  /** An id, or a person's number or address as its keyed hash; null: the account itself. */
  target: string | null;
  ip: string | null;
}

export interface Schema {
  settings: SettingsTable;
  accounts: AccountsTable;
  sender_names: SenderNamesTable;
  sender_domains: SenderDomainsTable;
  dkim_keys: DkimKeysTable;
  idempotency_keys: IdempotencyKeysTable;
  jobs: JobsTable;
  webhook_secrets: WebhookSecretsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_events: WebhookEventsTable;
  sends: SendsTable;
  send_recipients: SendRecipientsTable;
  recipient_history: RecipientHistoryTable;
  usage_rollup: UsageRollupTable;
  usage_deltas: UsageDeltasTable;
  console_sessions: ConsoleSessionsTable;
  sandbox_sms: SandboxSmsTable;
  verifications: VerificationsTable;
  verification_sends: VerificationSendsTable;
  verify_blocked: VerifyBlockedTable;
  verify_rollup: VerifyRollupTable;
  sandbox_email: SandboxEmailTable;
  email_campaigns: EmailCampaignsTable;
  sms_parts: SmsPartsTable;
  sms_receipts: SmsReceiptsTable;
  smpp_submits: SmppSubmitsTable;
  smsc_connections: SmscConnectionsTable;
  sms_routes: SmsRoutesTable;
  smsc_binds: SmscBindsTable;
  sms_inbound: SmsInboundTable;
  suppressions: SuppressionsTable;
  landing_pages: LandingPagesTable;
  shortener_domains: ShortenerDomainsTable;
  links: LinksTable;
  link_clicks: LinkClicksTable;
  contact_lists: ContactListsTable;
  contact_properties: ContactPropertiesTable;
  contacts: ContactsTable;
  contact_id_counters: ContactIdCountersTable;
  list_members: ListMembersTable;
  contact_batches: ContactBatchesTable;
  erasures: ErasuresTable;
  erased_suppressions: ErasedSuppressionsTable;
  api_keys: ApiKeysTable;
  webhook_endpoints: WebhookEndpointsTable;
  audit_entries: AuditEntriesTable;
}
