import type { Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Schema } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { silentLog, type Log } from '../log.ts';
import type { Keyring } from '../sealed.ts';
import { SnoozeJob, type Job, type JobHandler, type JobRun } from '../queue/worker.ts';
import { usableUrl } from '../url-password.ts';
import { urlKey } from './url-passwords.ts';
import { RefusedDestination, systemResolver, vetDestination, type Resolver } from './destination.ts';
import { disableEndpoints } from './endpoints.ts';
import { abandonDelivery, type DeliveryJob, type DeliveryRow } from './outbox.ts';
import { post, PostTimeout } from './post.ts';
import { PostSlots } from './post-slots.ts';
import { nextAttemptAt } from './schedule.ts';
import { ensureSecret, signatureHeader, signingSecrets, type AccountSecrets } from './secrets.ts';

export interface DeliveryDeps {
  db: Kysely<Schema>;
  clock: Clock;
  config: { webhookAllowPrivate: boolean };
  /** ENCRYPTION_KEY, which opens the account's webhook secrets (secrets.ts) and a URL's password. */
  encryptionKey: Keyring;
  log?: Log;
}

export interface DeliveryOptions {
  /** How long a receiver has to answer: 10 s (issue 3) unless a test wants a shorter wait. */
  timeoutMs?: number;
  resolve?: Resolver;
  /** How long a claimed delivery waits for a free slot at its host: 30 s unless a test wants less. */
  hostWaitMs?: number;
}

/**
 * How long a claimed delivery may wait in its worker slot for a post to its host to end
 * (post-slots.ts) before it goes back to the queue.
 */
const HOST_WAIT_MS = 30_000;

type Outcome =
  | { result: 'delivered'; statusCode: number }
  /** Not to be retried: the receiver answered 410 Gone, or the URL is refused. */
  | { result: 'stopped'; statusCode: number | null; error: string }
  | { result: 'failed'; statusCode: number | null; error: string; retryAfter?: string };

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException).code ?? (error as Error).message;

// Standard Webhooks, "Delivery success and failure": 2xx succeeds and every other answer
// fails, 3xx included (redirects are not followed), 4xx included (a receiver answering 404
// during a bad deploy recovers as often as one answering 500). 410 Gone asks the sender to
// disable the endpoint: the event is not posted again, and the account's endpoints at that URL
// take no more (record); a URL that came with a request has no more events but its own.
function judge(statusCode: number, headers: { location?: string; 'retry-after'?: string }): Outcome {
  if (statusCode >= 200 && statusCode < 300) return { result: 'delivered', statusCode };
  if (statusCode === 410) {
    return {
      result: 'stopped',
      statusCode,
      error: 'the receiver answered 410 Gone, so this event is not posted again',
    };
  }
  if (statusCode >= 300 && statusCode < 400) {
    return {
      result: 'failed',
      statusCode,
      error: `the receiver redirected to ${headers.location ?? 'nowhere'}; redirects are not followed`,
    };
  }
  return {
    result: 'failed',
    statusCode,
    error: `the receiver answered ${statusCode}`,
    retryAfter: headers['retry-after'],
  };
}

/**
 * The `webhook.deliver` job: one attempt at posting one delivery, recorded on the
 * delivery row, which keeps its own count. A failure that may be retried snoozes the job
 * to the webhook schedule's time, so the queue's backoff and attempts never apply.
 */
export function webhookDeliveryHandler(deps: DeliveryDeps, options: DeliveryOptions = {}): JobHandler {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const resolve = options.resolve ?? systemResolver;
  const hostWaitMs = options.hostWaitMs ?? HOST_WAIT_MS;
  const slots = new PostSlots(deps.clock);
  const log = deps.log ?? silentLog;

  /**
   * Not an attempt: `comeBackAt` when the delivery was turned away from its host or its account's
   * share of posts, 'interrupted' when the worker is stopping.
   */
  async function attempt(
    delivery: DeliveryRow,
    signal: AbortSignal,
  ): Promise<Outcome | { comeBackAt: number } | 'interrupted'> {
    const url = usableUrl(await urlKey(deps.db, deps.encryptionKey), delivery.url);
    if (url === undefined) {
      const error = 'the password in the URL was sealed under a key lost with ENCRYPTION_KEY: save the URL again';
      return { result: 'stopped', statusCode: null, error };
    }
    let destination: Awaited<ReturnType<typeof vetDestination>>;
    try {
      destination = await vetDestination(url, { allowPrivate: deps.config.webhookAllowPrivate, resolve });
    } catch (error) {
      if (error instanceof RefusedDestination) return { result: 'stopped', statusCode: null, error: error.message };
      return { result: 'failed', statusCode: null, error: `could not resolve the host: ${errorCode(error)}` };
    }
    const slot = await slots.take(delivery.account_id, destination.target.hostname, hostWaitMs, signal);
    if (slot === 'interrupted') return slot;
    if (typeof slot === 'number') return { comeBackAt: slot };
    // Read once the slot is taken: a rotation while the post waited for it signs it too.
    let accountSecrets: AccountSecrets;
    try {
      accountSecrets = await ensureSecret(deps.db, deps.encryptionKey, deps.clock, delivery.account_id);
    } catch (error) {
      slot.give();
      // Sealed under an ENCRYPTION_KEY this service no longer holds: the account must rotate it.
      if (error instanceof AppError) return { result: 'failed', statusCode: null, error: error.message };
      throw error;
    }
    try {
      const now = deps.clock.now();
      const timestamp = Math.floor(now / 1000);
      const secrets = signingSecrets(accountSecrets, now);
      const headers = {
        'content-type': 'application/json',
        'user-agent': 'Herald',
        'webhook-id': delivery.id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signatureHeader(secrets, delivery.id, timestamp, delivery.payload),
      };
      const answer = await post(
        destination.target,
        destination.addresses,
        headers,
        delivery.payload,
        timeoutMs,
        signal,
      );
      return judge(answer.statusCode, answer.headers);
    } catch (error) {
      if (signal.aborted) return 'interrupted';
      return {
        result: 'failed',
        statusCode: null,
        error: error instanceof PostTimeout ? error.message : `connection failed: ${errorCode(error)}`,
      };
    } finally {
      slot.give();
    }
  }

  /** Saves the attempt; the time of the next one, if any. A replay meanwhile wins: nothing is saved. */
  async function record(delivery: DeliveryRow, outcome: Outcome): Promise<number | undefined> {
    const now = deps.clock.now();
    const attempts = delivery.attempts + 1;
    const retryAt = outcome.result === 'failed' ? nextAttemptAt(attempts, now, outcome.retryAfter) : undefined;
    const status = outcome.result === 'delivered' ? 'delivered' : retryAt === undefined ? 'failed' : 'pending';
    let lastError = outcome.result === 'delivered' ? null : outcome.error;
    if (outcome.result === 'failed' && retryAt === undefined) lastError += `; gave up after ${attempts} attempts`;
    const save = (db: Kysely<Schema>) =>
      db
        .updateTable('webhook_deliveries')
        .set({
          status,
          attempts,
          last_status_code: outcome.statusCode,
          last_error: lastError,
          last_attempt_at: now,
          next_attempt_at: retryAt ?? null,
          delivered_at: outcome.result === 'delivered' ? now : delivery.delivered_at,
        })
        .where('id', '=', delivery.id)
        .where('generation', '=', delivery.generation)
        .executeTakeFirst();
    // 410 Gone: the account's endpoints at the URL are disabled with the attempt, or neither is.
    const saveGone = async (trx: Kysely<Schema>) => {
      const saved = await save(trx);
      if (saved.numUpdatedRows > 0n) await disableEndpoints(trx, delivery.account_id, delivery.url, now);
      return saved;
    };
    const saved = await (outcome.statusCode === 410 ? deps.db.transaction().execute(saveGone) : save(deps.db));
    if (saved.numUpdatedRows === 0n) return undefined;
    if (status === 'failed') givenUp(delivery, attempts, lastError!);
    return retryAt;
  }

  /**
   * The account's receiver will not get this event unless someone replays it: a warning
   * naming the account, the receiver's host (its path and query may hold the customer's
   * own tokens) and why.
   */
  function givenUp(delivery: DeliveryRow, attempts: number, error: string): void {
    const host = URL.parse(delivery.url)?.host ?? '(not a URL)';
    const fields = { accountId: delivery.account_id, deliveryId: delivery.id, host, attempts, error };
    log.warn(fields, `webhook delivery given up; POST /webhooks/deliveries/${delivery.id}/retry posts it again`);
  }

  return {
    async handle(job: Job, run: JobRun) {
      const { deliveryId, generation } = job.payload as DeliveryJob;
      const delivery = await deps.db
        .selectFrom('webhook_deliveries')
        .selectAll()
        .where('id', '=', deliveryId)
        .executeTakeFirst();
      // Gone with its account, delivered, given up, or replaced by a replay's job.
      if (!delivery || delivery.generation !== generation || delivery.status !== 'pending') return;
      const outcome = await attempt(delivery, run.signal);
      if (outcome === 'interrupted') throw new SnoozeJob(deps.clock.now(), 'webhook post interrupted');
      if ('comeBackAt' in outcome) throw new SnoozeJob(outcome.comeBackAt, 'webhook post waits its turn');
      const retryAt = await record(delivery, outcome);
      if (retryAt !== undefined) throw new SnoozeJob(retryAt);
    },
    onDead: (trx, job, error) => abandonDelivery(trx, job.payload as DeliveryJob, error),
  };
}
