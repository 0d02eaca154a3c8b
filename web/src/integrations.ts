/**
 * The words of API keys and webhook endpoints as the console offers them, each with what it
 * means (docs/api-keys.md, "Scopes"; docs/api.md, "Webhook endpoints"). In the API's order:
 * test/console/keys-browser.test.ts holds them to src/auth/api-keys.ts and src/webhooks/endpoints.ts.
 */
export const SCOPES = [
  { value: 'sms:send', meaning: 'Send and cancel SMS' },
  { value: 'email:send', meaning: 'Send and cancel emails' },
  { value: 'contacts:write', meaning: 'Create, change and delete contacts, properties, lists, landing pages' },
  { value: 'suppressions', meaning: 'Add and remove SMS and email suppressions' },
  { value: 'verify', meaning: 'Start, check and cancel verifications; read them and their statistics' },
  { value: 'read', meaning: 'Read everything but the webhook secret, privacy exports, keys and sessions (every GET)' },
  { value: 'webhooks', meaning: 'Read and rotate the webhook secret, retry deliveries, manage webhook endpoints' },
  { value: 'privacy', meaning: "Export and erase a person's data" },
  { value: 'account', meaning: 'Change the account settings and read the audit log' },
] as const;

export const ENDPOINT_EVENTS = [
  { value: 'sms.status', meaning: "Each SMS recipient's delivery status" },
  { value: 'email.events', meaning: 'Email deliveries, bounces, opens, clicks, unsubscribes and complaints' },
  { value: 'contacts.batch', meaning: 'A contacts batch completed or failed' },
  { value: 'sms.inbound', meaning: 'An SMS received from a handset (a reply or a keyword)' },
  { value: 'verify.status', meaning: "A verification's outcome" },
] as const;
