import type { AppContext } from '../context.ts';
import { badRequest, unprocessable } from '../errors.ts';
import { erasureKey } from '../messaging/erased-identifiers.ts';
import { newSendId } from '../messaging/accept.ts';
import { addressStanding } from '../messaging/recipients.ts';
import type { PreparedSms } from './accept.ts';
import type { SmsDraft } from './draft.ts';
import type { SmsRequest } from './schemas.ts';
import { storedSms } from './sealing.ts';
import { checkSmsRequest, prepareSms } from './validate.ts';

/**
 * An `/sms/single` or `/sms/batch` request checked (400, 422), as its draft: what the send and
 * its dry run (dry-run.ts) both start from. A single's recipient is settled here: a one-time
 * passcode never vanishes behind a 202 (ARCHITECTURE.md). Verify's codes come this way too,
 * with `optIn: false` (only a suppression refuses them), `opensInSandbox` and `validUntil`.
 */
export async function checkedSmsDraft(
  ctx: Pick<AppContext, 'clock' | 'config' | 'database' | 'encryptionKey'>,
  kind: SmsDraft['kind'],
  body: SmsRequest,
  account: { id: string; timeZoneOffset: string; smartEncoding: boolean },
  options: { optIn: boolean; opensInSandbox?: boolean; validUntil?: number } = { optIn: true },
): Promise<SmsDraft> {
  const { draft, errors } = checkSmsRequest(kind, body, account, ctx.clock.now(), ctx.config.publicUrl);
  if (errors.length > 0) throw badRequest('The SMS request is not valid.', errors);
  await prepareSms(ctx.database.reads, account.id, draft, { defaultSenderName: ctx.config.defaultSenderName });
  if (kind === 'single') {
    const [recipient] = draft.recipients;
    const { refusal, contactId } = await addressStanding(ctx.database.reads, 'sms', account.id, recipient.mobile, {
      optIn: options.optIn,
      erasureKey: await erasureKey(ctx.database.db, ctx.encryptionKey),
    });
    if (refusal)
      throw unprocessable('The SMS may not be sent to this recipient.', [{ field: 'recipient', message: refusal }]);
    // A scheduled one is settled again when it is sent, by its worker's expansion.
    if (draft.scheduledAt === null) recipient.contactId = contactId;
  }
  if (options.opensInSandbox) draft.opensInSandbox = true;
  if (options.validUntil !== undefined) draft.validUntil = options.validUntil;
  return draft;
}

/** An SMS request checked (checkedSmsDraft) and made ready to write, sealed where it must be. */
export async function prepareSmsRequest(
  ctx: Pick<AppContext, 'clock' | 'config' | 'database' | 'encryptionKey'>,
  kind: SmsDraft['kind'],
  body: SmsRequest,
  account: { id: string; timeZoneOffset: string; smartEncoding: boolean },
  options: { optIn: boolean; opensInSandbox?: boolean; validUntil?: number } = { optIn: true },
): Promise<PreparedSms> {
  const now = ctx.clock.now();
  const draft = await checkedSmsDraft(ctx, kind, body, account, options);
  const sendId = newSendId();
  const { listIds, scheduledAt, webhookUrl } = draft;
  return {
    sendId,
    accountId: account.id,
    draft: { kind, listIds, scheduledAt, webhookUrl },
    ...storedSms(draft, sendId, ctx.encryptionKey),
    now,
  };
}
