import type { AppContext } from '../context.ts';
import { badRequest, unprocessable } from '../errors.ts';
import { erasureKey } from '../messaging/erased-identifiers.ts';
import { newSendId } from '../messaging/accept.ts';
import { addressStanding } from '../messaging/recipients.ts';
import { sealedTags } from '../messaging/sealed-tags.ts';
import type { PreparedEmail } from './accept.ts';
import type { EmailBatchRequest } from './schemas.ts';
import { checkEmailRequest, prepareEmail, type EmailDraft } from './validate.ts';

/**
 * An `/email/batch` request checked (400, 422), as its draft and the HTML it sends (the
 * campaign's, when it names one): what the batch and its dry run (dry-run.ts) both start from.
 */
export async function checkedEmailDraft(
  ctx: Pick<AppContext, 'config' | 'database'>,
  body: EmailBatchRequest,
  account: { id: string; timeZoneOffset: string },
  now: number,
): Promise<{ draft: EmailDraft; html: string }> {
  const { draft, errors } = checkEmailRequest(body, account, now);
  if (errors.length > 0) throw badRequest('The email batch is not valid.', errors);
  const { html } = await prepareEmail(ctx.database.reads, account.id, draft, {
    defaultEmailDomain: ctx.config.defaultEmailDomain,
  });
  return { draft, html };
}

/**
 * An `/email/batch` request checked (400, 422) and made ready to write. `passcode`: a Verify
 * code's message (one recipient), settled here as an immediate `/sms/single` is: a suppression
 * refuses it at once (422), the opt-in does not apply, its tags (which hold the code) are
 * sealed, and it goes in the passcode lane (accept.ts's EMAIL_SINGLE_KIND).
 */
export async function prepareEmailRequest(
  ctx: Pick<AppContext, 'clock' | 'config' | 'database' | 'encryptionKey'>,
  body: EmailBatchRequest,
  account: { id: string; timeZoneOffset: string },
  options: { passcode?: boolean; validUntil?: number } = {},
): Promise<PreparedEmail> {
  const now = ctx.clock.now();
  const { draft, html } = await checkedEmailDraft(ctx, body, account, now);
  const sendId = newSendId();
  let contactId: number | null | undefined;
  if (options.passcode) {
    const [{ address }] = draft.recipients;
    const standing = await addressStanding(ctx.database.reads, 'email', account.id, address, {
      optIn: false,
      erasureKey: await erasureKey(ctx.database.db, ctx.encryptionKey),
    });
    if (standing.refusal)
      throw unprocessable('The email may not be sent to this recipient.', [
        { field: 'recipients[0].to', message: standing.refusal },
      ]);
    contactId = standing.contactId;
  }
  const { from, replyTo, subject, preheader, campaignId, listIds, scheduledAt, webhookUrl, localDelivery } = draft;
  return {
    sendId,
    accountId: account.id,
    draft: { listIds, scheduledAt, webhookUrl },
    content: {
      from,
      replyTo,
      subject,
      preheader,
      html,
      campaignId,
      ...(localDelivery && { localDelivery }),
      ...(options.passcode && { passcode: true }),
      ...(options.validUntil !== undefined && { validUntil: options.validUntil }),
    },
    recipients: draft.recipients.map((recipient) => {
      const tags = Object.keys(recipient.tags).length > 0 ? JSON.stringify(recipient.tags) : null;
      return {
        address: recipient.address,
        tags: tags && options.passcode ? sealedTags(ctx.encryptionKey, sendId, recipient.address, tags) : tags,
        ...(contactId !== undefined && { contactId }),
      };
    }),
    now,
  };
}
