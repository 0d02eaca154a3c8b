import type { Migration } from 'kysely';
import * as foundation from './0001_foundation.ts';
import * as queue from './0002_queue.ts';
import * as webhooks from './0003_webhooks.ts';
import * as crm from './0004_crm.ts';
import * as postgresStorage from './0005_postgres_storage.ts';
import * as queueLanes from './0006_queue_lanes.ts';
import * as contactIdsPerAccount from './0007_contact_ids_per_account.ts';
import * as sends from './0009_sends.ts';
import * as smsReceipts from './0010_sms_receipts.ts';
import * as suppressions from './0011_suppressions.ts';
import * as landingPages from './0012_landing_pages.ts';
import * as webhookEvents from './0008_webhook_events.ts';
import * as sealedSandboxSms from './0013_sealed_sandbox_sms.ts';
import * as retention from './0014_retention.ts';
import * as expansionCheckpoint from './0015_expansion_checkpoint.ts';
import * as smppSubmits from './0016_smpp_submits.ts';
import * as inboundSms from './0017_inbound_sms.ts';
import * as privateTokenHashes from './0018_private_token_hashes.ts';
import * as email from './0019_email.ts';
import * as dkimKeys from './0020_dkim_keys.ts';
import * as emailRetries from './0021_email_retries.ts';
import * as emailMessageIds from './0022_email_message_ids.ts';
import * as usageRollup from './0023_usage_rollup.ts';
import * as usageDeltas from './0024_usage_deltas.ts';
import * as consoleSessions from './0025_console.ts';
import * as messageRowsUnchained from './0026_message_rows_unchained.ts';
import * as sealedSecrets from './0027_sealed_secrets.ts';
import * as recipientErrorCodes from './0028_recipient_error_codes.ts';
import * as sandboxSmsByAccount from './0029_sandbox_sms_by_account.ts';
import * as eraseClearPrivateTokens from './0030_erase_clear_private_tokens.ts';
import * as smsRouting from './0031_sms_routing.ts';
import * as verify from './0032_verify.ts';
import * as smartEncoding from './0033_smart_encoding.ts';
import * as quietHours from './0034_quiet_hours.ts';
import * as contactBatchesOutliveLists from './0035_contact_batches_outlive_lists.ts';
import * as erasures from './0036_erasures.ts';
import * as apiKeys from './0037_api_keys.ts';
import * as webhookEndpoints from './0038_webhook_endpoints.ts';
import * as audit from './0039_audit.ts';
import * as smsReceiptRecipients from './0040_sms_receipt_recipients.ts';
import * as smsPartSubmitTimes from './0041_sms_part_submit_times.ts';
import * as recipientTokenForms from './0042_recipient_token_forms.ts';
import * as smsTriedAgain from './0043_sms_tried_again.ts';
import * as urlPasswordsToSeal from './0044_url_passwords_to_seal.ts';
import * as webhookEndpointsDisabled from './0045_webhook_endpoints_disabled.ts';
import * as contactBatchesQueuedAccount from './0046_contact_batches_queued_account.ts';
import * as contactBatchesAcceptOrder from './0047_contact_batches_accept_order.ts';
import * as jobsReadyPerAccount from './0048_jobs_ready_per_account.ts';

/** Every migration, in order. Names are never changed once released: they are the version record. */
export const migrations: Record<string, Migration> = {
  '0001_foundation': foundation,
  '0002_queue': queue,
  '0003_webhooks': webhooks,
  '0004_crm': crm,
  '0005_postgres_storage': postgresStorage,
  '0006_queue_lanes': queueLanes,
  '0007_contact_ids_per_account': contactIdsPerAccount,
  '0008_webhook_events': webhookEvents,
  '0009_sends': sends,
  '0010_sms_receipts': smsReceipts,
  '0011_suppressions': suppressions,
  '0012_landing_pages': landingPages,
  '0013_sealed_sandbox_sms': sealedSandboxSms,
  '0014_retention': retention,
  '0015_expansion_checkpoint': expansionCheckpoint,
  '0016_smpp_submits': smppSubmits,
  '0017_inbound_sms': inboundSms,
  '0018_private_token_hashes': privateTokenHashes,
  '0019_email': email,
  '0020_dkim_keys': dkimKeys,
  '0021_email_retries': emailRetries,
  '0022_email_message_ids': emailMessageIds,
  '0023_usage_rollup': usageRollup,
  '0024_usage_deltas': usageDeltas,
  '0025_console': consoleSessions,
  '0026_message_rows_unchained': messageRowsUnchained,
  '0027_sealed_secrets': sealedSecrets,
  '0028_recipient_error_codes': recipientErrorCodes,
  '0029_sandbox_sms_by_account': sandboxSmsByAccount,
  '0030_erase_clear_private_tokens': eraseClearPrivateTokens,
  '0031_sms_routing': smsRouting,
  '0032_verify': verify,
  '0033_smart_encoding': smartEncoding,
  '0034_quiet_hours': quietHours,
  '0035_contact_batches_outlive_lists': contactBatchesOutliveLists,
  '0036_erasures': erasures,
  '0037_api_keys': apiKeys,
  '0038_webhook_endpoints': webhookEndpoints,
  '0039_audit': audit,
  '0040_sms_receipt_recipients': smsReceiptRecipients,
  '0041_sms_part_submit_times': smsPartSubmitTimes,
  '0042_recipient_token_forms': recipientTokenForms,
  '0043_sms_tried_again': smsTriedAgain,
  '0044_url_passwords_to_seal': urlPasswordsToSeal,
  '0045_webhook_endpoints_disabled': webhookEndpointsDisabled,
  '0046_contact_batches_queued_account': contactBatchesQueuedAccount,
  '0047_contact_batches_accept_order': contactBatchesAcceptOrder,
  '0048_jobs_ready_per_account': jobsReadyPerAccount,
};
