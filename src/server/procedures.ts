/**
 * Every module that defines procedures (db/procedure.ts): the database side's route table,
 * as worker.ts is the queue's. A database resolves them all when it starts (Database.ready),
 * on SQLite in its own thread as well, so a procedure misnamed, or defined in a module left
 * out of this list, stops the start instead of failing a request. The database thread
 * imports these modules and everything they import, once for each database opened: keep them
 * clear of what only the main thread needs (libphonenumber's metadata belongs to crm/validate.ts,
 * jose to auth/tokens.ts, the pg driver and the migrations to db/database.ts).
 */
export const PROCEDURE_MODULES: readonly string[] = [
  '../accounts/service.ts',
  '../auth/api-keys.ts',
  '../crm/apply.ts',
  '../crm/batches.ts',
  '../crm/manage.ts',
  '../crm/setup.ts',
  '../email/accept.ts',
  '../email/campaigns.ts',
  '../email/inbound.ts',
  '../email/record.ts',
  '../email/token-recipients.ts',
  '../links/landing-pages.ts',
  '../messaging/accept.ts',
  '../messaging/deletions.ts',
  '../messaging/pipeline.ts',
  '../messaging/retention.ts',
  '../messaging/rollup.ts',
  '../privacy/erasures.ts',
  '../senders/dkim-keys.ts',
  '../senders/domains.ts',
  '../sms/accept.ts',
  '../sms/expiry.ts',
  '../sms/inbound.ts',
  '../sms/send.ts',
  '../sms/single.ts',
  '../sms/transports/smpp/journal.ts',
  '../verify/record.ts',
  '../webhooks/endpoints.ts',
  '../webhooks/outbox.ts',
  '../webhooks/secrets.ts',
].map((path) => new URL(path, import.meta.url).href);
