import type { AppContext } from '../context.ts';
import { dryRunAudience, type AudienceCount } from '../messaging/dry-run.ts';
import { erasureKey } from '../messaging/erased-identifiers.ts';
import { amountOf } from '../messaging/money.ts';
import { propertyNames } from '../messaging/pipeline.ts';
import { compileTemplate } from '../messaging/tags.ts';
import { linkBase } from '../links/shortener.ts';
import type { SmsContent } from './accept.ts';
import { sampleLink, withLinkTag } from './links.ts';
import { checkedSmsDraft } from './prepare.ts';
import { readRoutes, RoutingTable, unroutedToDefault } from './routing/table.ts';
import type { SmsRequest } from './schemas.ts';
import { isBlank, MAX_PARTS, measure } from './segments.ts';
import { renderText, type SmsRendering } from './send.ts';
import type { SmsDraft } from './draft.ts';

export interface SmsPreview {
  recipient: string;
  text: string;
  parts: number;
  encoding: string;
  replacedCharacters: number;
}

/** ARCHITECTURE.md, "Preflight": what `?dryRun=true` answers for `/sms/single` and `/sms/batch`. */
export interface SmsDryRun {
  dryRun: true;
  recipients: AudienceCount;
  parts: number;
  encoding: { 'GSM-7': number; 'UCS-2': number };
  estimatedCost: Array<{ amount: string; currency: string }>;
  preview: SmsPreview[];
}

/**
 * An SMS request as it would go, with nothing written: the request's checks as the send
 * makes them (400, 422: a single's refused recipient too), then every recipient it would
 * reach rendered as its worker renders it (send.ts, renderText), measured, and priced by the
 * route it would take. A landing page link is a stand-in of the real one's length: the
 * dry run makes no code. `preview`: how many of the first recipients to show.
 */
export async function smsDryRun(
  ctx: Pick<AppContext, 'clock' | 'config' | 'database' | 'encryptionKey'>,
  kind: SmsDraft['kind'],
  body: SmsRequest,
  account: { id: string; timeZoneOffset: string; smartEncoding: boolean },
  preview: number,
): Promise<SmsDryRun> {
  const db = ctx.database.reads;
  const draft = await checkedSmsDraft(ctx, kind, body, account);
  const content: SmsContent = { ...draft, opensInSandbox: false };
  const link = draft.shortener === null ? undefined : sampleLink(linkBase(draft.shortener.url, ctx.config.publicUrl));
  const template = compileTemplate(link === undefined ? draft.body : withLinkTag(draft.body));
  const rendering: SmsRendering = {
    content,
    template,
    names: template.tags.length > 0 ? await propertyNames(db, account.id) : new Map(),
  };
  const routes = new RoutingTable(await readRoutes(db));
  // A number no route takes fails when sent (`no route`), unbilled, where connections were added
  // and SMS_TRANSPORT is unset.
  const anyAdded = (await db.selectFrom('smsc_connections').select('name').limit(1).executeTakeFirst()) !== undefined;
  const unrouted = unroutedToDefault({ anyAdded, defaultSet: ctx.config.smsTransportUrl !== undefined });
  const result: Omit<SmsDryRun, 'recipients' | 'estimatedCost'> = {
    dryRun: true,
    parts: 0,
    encoding: { 'GSM-7': 0, 'UCS-2': 0 },
    preview: [],
  };
  // Exact however large: a price below 100,000 a part times a million recipients' parts passes 2^53.
  const costs = new Map<string, bigint>();
  const recipients = await dryRunAudience(
    db,
    ctx.database.dialect,
    {
      channel: 'sms',
      accountId: account.id,
      listIds: draft.listIds,
      erasureKey: await erasureKey(ctx.database.db, ctx.encryptionKey),
      recipients: draft.recipients.map((r) => ({ address: r.mobile, tags: r.tags })),
      given: kind === 'single' ? 1 : ((body as { recipients?: unknown[] }).recipients?.length ?? 0),
    },
    (recipients) => {
      for (const recipient of recipients) {
        const { text, replacedCharacters } = renderText(recipient, rendering, link);
        const { encoding, parts } = measure(text);
        result.encoding[encoding]++;
        // One its tags leave empty or make longer than a message can be fails when it is sent, as
        // does one no route takes: nothing billed.
        const route = routes.routeFor(account.id, recipient.address);
        const routed = route !== undefined || unrouted;
        const billed = parts <= MAX_PARTS && !isBlank(text) && routed ? parts : 0;
        result.parts += billed;
        if (route?.priceMicros != null && route.currency !== null)
          costs.set(route.currency, (costs.get(route.currency) ?? 0n) + BigInt(route.priceMicros) * BigInt(billed));
        if (result.preview.length < preview)
          result.preview.push({ recipient: recipient.address, text, parts, encoding, replacedCharacters });
      }
    },
  );
  const estimatedCost = [...costs].map(([currency, micros]) => ({ amount: amountOf(micros), currency }));
  return { ...result, recipients, estimatedCost };
}
