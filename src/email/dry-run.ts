import type { AppContext } from '../context.ts';
import { dryRunAudience, type AudienceCount } from '../messaging/dry-run.ts';
import { erasureKey } from '../messaging/erased-identifiers.ts';
import { propertyNames, rowProperties } from '../messaging/pipeline.ts';
import { compileEmail } from './compile.ts';
import { renderedText, type RecipientUrls } from './render.ts';
import type { EmailBatchRequest } from './schemas.ts';
import { TRACKING_PATHS } from './tracking.ts';
import { checkedEmailDraft } from './prepare.ts';

/** The token of the preview's unsubscribe link: each recipient's own is made when it is sent. */
export const UNSUBSCRIBE_STAND_IN = 'TOKEN';

/** ARCHITECTURE.md, "Preflight": what `?dryRun=true` answers for `/email/batch`. */
export interface EmailDryRun {
  dryRun: true;
  recipients: AudienceCount;
  estimatedCost: [];
  preview: Array<{ email: string; subject: string; text: string }>;
}

/**
 * An email batch as it would go, with nothing written: the request's checks as the send
 * makes them (400, 422), the recipients counted by the expansion's rules, and the first
 * `preview` rendered (subject and text alternative) from the batch's compiled email. Tracked
 * links show where they lead, and the unsubscribe link a stand-in token: tokens are made at send.
 */
export async function emailDryRun(
  ctx: Pick<AppContext, 'clock' | 'config' | 'database' | 'encryptionKey'>,
  body: EmailBatchRequest,
  account: { id: string; timeZoneOffset: string },
  preview: number,
): Promise<EmailDryRun> {
  const db = ctx.database.reads;
  const { draft, html } = await checkedEmailDraft(ctx, body, account, ctx.clock.now());
  const compiled = compileEmail(
    { subject: draft.subject, preheader: draft.preheader, html, from: draft.from, replyTo: draft.replyTo },
    { tracking: true },
  );
  const unsubscribe = `${ctx.config.publicUrl}${TRACKING_PATHS.unsubscribe}/${UNSUBSCRIBE_STAND_IN}`;
  const urls: RecipientUrls = { click: (i) => compiled.links[i], open: '', unsubscribe };
  const names = await propertyNames(db, account.id);
  const shown: EmailDryRun['preview'] = [];
  const recipients = await dryRunAudience(
    db,
    ctx.database.dialect,
    {
      channel: 'email',
      accountId: account.id,
      listIds: draft.listIds,
      erasureKey: await erasureKey(ctx.database.db, ctx.encryptionKey),
      recipients: draft.recipients.map((r) => ({ address: r.address, tags: r.tags })),
      given: body.recipients?.length ?? 0,
    },
    (willSend) => {
      for (const recipient of willSend.slice(0, preview - shown.length)) {
        const own = recipient.tags ? (JSON.parse(recipient.tags) as Record<string, string>) : null;
        const sources = { own, properties: rowProperties(recipient, names) };
        shown.push({ email: recipient.address, ...renderedText(compiled, { sources, urls }) });
      }
    },
  );
  return { dryRun: true, recipients, estimatedCost: [], preview: shown };
}
