import type { AppContext } from '../context.ts';
import type { Log } from '../log.ts';
import { Worker, type KindOptions, type WorkerOptions } from '../queue/worker.ts';
import { DELIVER_KIND } from '../webhooks/outbox.ts';
import { webhookDeliveryHandler } from '../webhooks/deliver.ts';
import { SLOTS_PER_ACCOUNT } from '../webhooks/post-slots.ts';
import { GATHER_KIND, webhookGatherHandler } from '../webhooks/events.ts';
import { CONTACT_BATCH_KIND } from '../crm/batches.ts';
import { contactBatchHandler } from '../crm/apply.ts';
import { SMS_SEND_KIND, SMS_SINGLE_KIND } from '../sms/accept.ts';
import { SMS_PURGES } from '../sms/receipts.ts';
import { INBOUND_PURGES, receiveInboundSms } from '../sms/inbound.ts';
import { RECEIPT_EXPIRY_KIND, receiptExpiryHandler } from '../sms/expiry.ts';
import { VERIFY_EXPIRY_KIND, verifyExpiryHandler } from '../verify/expiry.ts';
import { ERASURE_KIND } from '../privacy/erasures.ts';
import { erasureHandler } from '../privacy/service.ts';
import { VERIFY_PURGES } from '../verify/retention.ts';
import { smsSendHandler } from '../sms/send.ts';
import { emailRecipientZone, recipientZone } from '../messaging/recipient-zone.ts';
import { smsSingleHandler } from '../sms/single.ts';
import { BindsBeat } from '../sms/routing/binds.ts';
import { sandboxTransport } from '../sms/transports/sandbox.ts';
import { erasureKey } from '../messaging/erased-identifiers.ts';
import { SMPP_PURGES } from '../sms/transports/smpp/journal.ts';
import { SmppJournal, smppTransport } from '../sms/transports/smpp/transport.ts';
import { routedTransport } from '../sms/transports/routed.ts';
import type { Config } from '../config.ts';
import { DEFAULT_SMSC, type InboundSms, type SmsTransport } from '../sms/transport.ts';
import { RETENTION_KIND, retentionHandler } from '../messaging/retention.ts';
import { USAGE_FOLD_KIND, usageFoldHandler } from '../messaging/rollup.ts';
import { EMAIL_SEND_KIND, EMAIL_SINGLE_KIND } from '../email/accept.ts';
import { emailSendHandler } from '../email/send.ts';
import { sandboxEmailTransport } from '../email/transports/sandbox.ts';
import { RenderPool } from '../email/render-pool.ts';
import { smtpEmailTransport } from '../email/transports/smtp.ts';
import type { EmailTransport } from '../email/transport.ts';

/**
 * Webhook posts: claimed per account, no more of one account's than it may hold of the slots
 * (post-slots.ts), so one account's backlog or retries never hold another's posts back.
 */
export const DELIVER_OPTIONS: KindOptions = { concurrency: 32, perAccount: SLOTS_PER_ACCOUNT };

/**
 * Every module's job handlers, registered in one place: the worker side's route table.
 * `concurrency` is per worker process.
 */
export function registerJobHandlers(worker: Worker, ctx: AppContext, log?: Log): void {
  // Webhook posts wait on other people's servers: many at once, capped per host in deliver.ts.
  worker.register(DELIVER_KIND, webhookDeliveryHandler({ ...ctx, log }), DELIVER_OPTIONS);
  // Gathering status events into posts is a short transaction per stream, on the database only.
  worker.register(GATHER_KIND, webhookGatherHandler(ctx), { concurrency: 4 });
  // One at a time: a process applies batches in the order accepted (a retried one falls behind).
  worker.register(CONTACT_BATCH_KIND, contactBatchHandler(ctx), { concurrency: 1 });
  // Several sends at once, so a campaign's pages never hold a one-time passcode (its own lane) back.
  const journal = new SmppJournal(ctx.database, ctx.clock, log, () => erasureKey(ctx.db, ctx.encryptionKey));
  const transport = routedTransport({
    db: ctx.database.reads,
    keyring: ctx.encryptionKey,
    defaultTransport: smsTransport(ctx, log, journal, DEFAULT_SMSC, ctx.config.smsTransport),
    defaultSet: ctx.config.smsTransportUrl !== undefined,
    open: (connection) => smsTransport(ctx, log, journal, connection.name, connection.transport),
    log,
  });
  worker.holds(transport);
  // Its binds up per connection, for GET /admin/smsc in any process.
  worker.holds(new BindsBeat(ctx.db, ctx.clock, () => transport.connections(), log));
  worker.register(SMS_SEND_KIND, smsSendHandler({ ...ctx, transport, zoneOf: recipientZone }), { concurrency: 16 });
  // Immediate singles (one-time passcodes) go out together, a page of those claimed at once
  // (the concurrency bounds the pages in flight), and ahead of every other kind's work.
  worker.register(SMS_SINGLE_KIND, smsSingleHandler({ ...ctx, transport }), { concurrency: 256, urgent: true });
  // Email batches: several at once, each rendering and handing over a page at a time.
  const emailTransport = emailTransportOf(ctx, log);
  worker.holds(emailTransport);
  const renderPool = new RenderPool(ctx.config.emailRenderThreads);
  worker.holds(renderPool);
  const emailSend = emailSendHandler({ ...ctx, transport: emailTransport, renderPool, zoneOf: emailRecipientZone });
  worker.register(EMAIL_SEND_KIND, emailSend, { concurrency: 8 });
  // Verify's codes by email: the same work in a lane of its own, ahead of every campaign's pages.
  worker.register(EMAIL_SINGLE_KIND, emailSend, { concurrency: 32, urgent: true });
  // A recurring job: one sweep at a time across every process, once an hour.
  worker.register(
    RETENTION_KIND,
    retentionHandler(ctx, { ...SMS_PURGES, ...SMPP_PURGES, ...INBOUND_PURGES, ...VERIFY_PURGES }),
    {
      concurrency: 1,
    },
  );
  // Recurring too: what status changes counted, folded into the usage rollup by one job at a time.
  worker.register(USAGE_FOLD_KIND, usageFoldHandler(ctx), { concurrency: 1 });
  // Also recurring: messages no receipt settled end Failed after SMS_RECEIPT_TIMEOUT_HOURS.
  worker.register(RECEIPT_EXPIRY_KIND, receiptExpiryHandler(ctx), { concurrency: 1 });
  // And Verify's codes past their end, expired with their webhooks.
  worker.register(VERIFY_EXPIRY_KIND, verifyExpiryHandler(ctx), { concurrency: 1 });
  // One person's erasure at a time: each is a few short transactions.
  worker.register(ERASURE_KIND, erasureHandler(ctx), { concurrency: 1 });
}

/**
 * A connection's transport (SMS_TRANSPORT's is `default`): an SMPP one binds to its SMSC at once,
 * to take receipts even before it sends.
 */
function smsTransport(
  ctx: AppContext,
  log: Log | undefined,
  journal: SmppJournal,
  name: string,
  setting: Config['smsTransport'],
): SmsTransport {
  if (setting.kind === 'sandbox')
    return sandboxTransport(ctx.database, ctx.clock, { key: ctx.encryptionKey, fail: setting.fail, name });
  const receiveInbound = (mo: InboundSms) =>
    receiveInboundSms(ctx.database, ctx.clock, mo, { defaultSenderName: ctx.config.defaultSenderName });
  const { database, clock, metrics } = ctx;
  return smppTransport(setting.settings, {
    name,
    journal,
    database,
    clock,
    metrics,
    log,
    redisUrl: ctx.config.redisUrl,
    receiveInbound,
  });
}

/** EMAIL_TRANSPORT's transport: an SMTP one opens its pool's connections as messages come. */
function emailTransportOf(ctx: AppContext, log: Log | undefined): EmailTransport {
  const setting = ctx.config.emailTransport;
  if (setting.kind === 'sandbox')
    return sandboxEmailTransport(ctx.database, ctx.clock, { ...setting, key: ctx.encryptionKey });
  return smtpEmailTransport(setting.settings, { metrics: ctx.metrics, log, redisUrl: ctx.config.redisUrl });
}

type CreateWorkerOptions = Partial<Omit<WorkerOptions, 'log'>> & { log?: Log };

export function createWorker(ctx: AppContext, options: CreateWorkerOptions = {}): Worker {
  const worker = new Worker({ database: ctx.database, clock: ctx.clock, ...options });
  registerJobHandlers(worker, ctx, options.log);
  return worker;
}
