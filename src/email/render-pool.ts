import type { KeyObject } from 'node:crypto';
import type { Worker } from 'node:worker_threads';
import { startThread } from '../threads.ts';
import type { TagSources } from '../messaging/tags.ts';
import type { DkimSigningKey } from '../senders/dkim-keys.ts';
import type { CompiledEmail } from './render.ts';

/**
 * Rendering and signing emails on threads of their own. Both are pure CPU (tags, tracking URLs
 * and their MACs, quoted-printable, MIME; DKIM's hashes and RSA), most of an email's cost, and the
 * event loop that runs it also drives the transport and the database: on its own thread it
 * uses the machine's other cores, and a batch's rendering no longer holds back the process's
 * other work (an SMS passcode's job, a webhook post). Each thread is given a batch's compiled
 * email once, then recipients a group at a time; it answers their raw MIME, signed.
 */

/**
 * What a thread needs of a batch, given once: the compiled email, what each recipient's tracking
 * URLs are made of, and the key that signs.
 */
export interface ThreadBatch {
  compiled: CompiledEmail;
  /** The batch's send: its recipients' tracking tokens sign it (tracking-tokens.ts). */
  sendId: string;
  /** The current key of tracking tokens (tracking.ts's trackingKey(…).current). */
  trackingKey: KeyObject;
  publicUrl: string;
  /** BOUNCE_DOMAIN when List-Unsubscribe carries a `mailto:` (inbound mail is on), else undefined. */
  mailboxDomain: string | undefined;
  /** The From domain's DKIM key (senders/dkim-keys.ts's signingKeyFor). */
  dkimKey: DkimSigningKey;
}

/** One recipient as a thread renders it. */
export interface ThreadRecipient {
  recipientId: number;
  to: string;
  sources: TagSources;
  /** `<id@domain>` */
  messageId: string;
}

export type RenderRequest =
  | { kind: 'batch'; id: string; batch: ThreadBatch }
  | { kind: 'render'; call: number; batch: string; date: number; recipients: ThreadRecipient[] }
  | { kind: 'forget'; id: string };

export type RenderResponse = { call: number; raws: Uint8Array[] } | { call: number; error: string };

/**
 * A thread's heap holds its modules (nodemailer's composer and signer; not compile.ts's HTML
 * parser and html-to-text), a compiled email or two and a group of messages: about 11 MiB old
 * and a few MiB young while it renders. Bounded so a thread never grows the process by much,
 * but not tighter: at 32 MiB old a thread spent much of its time collecting garbage (two
 * threads alone, npm run bench:render-pool, made 662 messages/s at 32 and 3 MiB, 1,190 to
 * 1,226 at 48 and 8). The young generation of 6 MiB (2 MiB semi-spaces) made 811 and 857
 * messages/s on one thread against 843 and 869 at 8; until the threads were started with
 * their own limits (threads.ts) they had the main thread's 8 MiB semi-spaces, 16 MiB of
 * young generation each at their peak.
 */
const THREAD_LIMITS = { maxOldGenerationSizeMb: 48, maxYoungGenerationSizeMb: 6 };

interface Thread {
  worker: Worker;
  /** Calls not yet answered, by call number. */
  pending: Map<number, { resolve: (raws: Buffer[]) => void; reject: (error: Error) => void }>;
  /** The batches it was given. */
  batches: Set<string>;
}

export class RenderPool {
  readonly size: number;
  private readonly threads: Thread[] = [];
  private calls = 0;
  private batchCount = 0;

  /**
   * `size`: EMAIL_RENDER_THREADS, by default one a core but the event loop's, at least one and
   * at most four. On two cores one thread, kept busy by rendering ahead (email/send.ts), renders
   * and signs faster than plain nodemailer sends (100,000 emails over SMTP: 810 and 814
   * messages/s against 719 and 690), and a second one, about 60 MiB at its peak when it was
   * measured, took the process over 300 MiB for the sandbox's speed only (1,045 against 825).
   */
  constructor(size: number) {
    this.size = size;
  }

  /** A batch's renderer: recipients in, signed raw MIME out, in order. `close` tells the threads to drop the batch. */
  open(batch: ThreadBatch): { render(recipients: ThreadRecipient[], date: Date): Promise<Buffer[]>; close(): void } {
    const id = String(++this.batchCount);
    return {
      render: (recipients, date) => this.render(id, batch, recipients, date.getTime()),
      close: () => {
        for (const thread of this.threads) {
          if (thread.batches.delete(id)) thread.worker.postMessage({ kind: 'forget', id } satisfies RenderRequest);
        }
      },
    };
  }

  async close(): Promise<void> {
    const threads = this.threads.splice(0);
    await Promise.all(threads.map((thread) => thread.worker.terminate()));
  }

  private render(id: string, batch: ThreadBatch, recipients: ThreadRecipient[], date: number): Promise<Buffer[]> {
    if (recipients.length === 0) return Promise.resolve([]);
    const thread = this.leastBusy();
    if (!thread.batches.has(id)) {
      thread.worker.postMessage({ kind: 'batch', id, batch } satisfies RenderRequest);
      thread.batches.add(id);
    }
    const call = ++this.calls;
    return new Promise((resolve, reject) => {
      if (thread.pending.size === 0) thread.worker.ref();
      thread.pending.set(call, { resolve, reject });
      thread.worker.postMessage({ kind: 'render', call, batch: id, date, recipients } satisfies RenderRequest);
    });
  }

  /** The thread with the fewest calls waiting, a new one while the pool is not full and every thread has some. */
  private leastBusy(): Thread {
    let best: Thread | undefined;
    for (const thread of this.threads) if (!best || thread.pending.size < best.pending.size) best = thread;
    if (best && (best.pending.size === 0 || this.threads.length >= this.size)) return best;
    return this.start();
  }

  private start(): Thread {
    const worker = startThread(new URL('./render-thread.ts', import.meta.url), { resourceLimits: THREAD_LIMITS });
    // An idle thread does not keep the process alive; one with calls waiting does (render, above).
    worker.unref();
    const thread: Thread = { worker, pending: new Map(), batches: new Set() };
    worker.on('message', (response: RenderResponse) => {
      const waiting = thread.pending.get(response.call);
      if (!waiting) return;
      thread.pending.delete(response.call);
      if (thread.pending.size === 0) worker.unref();
      if ('error' in response) waiting.reject(new Error(`rendering failed: ${response.error}`));
      else waiting.resolve(response.raws.map((raw) => Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength)));
    });
    const fail = (error: Error) => {
      const index = this.threads.indexOf(thread);
      if (index >= 0) this.threads.splice(index, 1);
      for (const waiting of thread.pending.values()) waiting.reject(error);
      thread.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the render thread exited (code ${code})`)));
    this.threads.push(thread);
    return thread;
  }
}
