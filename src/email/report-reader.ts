import type { ResourceLimits, Worker } from 'node:worker_threads';
import { startThread } from '../threads.ts';
import { REPORT_BYTES_READ, type MailReport } from './mail-reports.ts';

/**
 * Reports read on a thread of their own, one after another. Reading is CPU the event loop that
 * answers the API would otherwise spend on a stranger's mail (ten mails of short lines held it
 * 115 ms at a time), and one at a time the parser's memory is one report's, bounded by the
 * thread's heap: a mail past it ends the thread, not the process, and is unparseable; the mails
 * behind it go to a new thread.
 */

export interface ReportRequest {
  call: number;
  message: Uint8Array;
}

export interface ReportResponse {
  call: number;
  report: MailReport;
}

/**
 * A report reads in about 22 MB of heap at most (the first MiB of a mail of short text lines,
 * its text decoded); twice that leaves room for the parser's own, and a process never grows by
 * more.
 */
const THREAD_LIMITS: ResourceLimits = { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 8 };

interface Call {
  message: Uint8Array;
  resolve: (report: MailReport) => void;
}

interface Thread {
  worker: Worker;
  /** Calls not yet answered, in the order posted: the thread answers them in that order. */
  pending: Map<number, Call>;
}

export class ReportReader {
  private thread: Thread | undefined;
  private calls = 0;
  private closed = false;
  private readonly limits: ResourceLimits;

  constructor(limits: ResourceLimits = THREAD_LIMITS) {
    this.limits = limits;
  }

  /** What `message` reports (mail-reports.ts's readMailReport, on the thread). Never rejects. */
  read(message: Buffer): Promise<MailReport> {
    if (this.closed) return Promise.resolve({ kind: 'unparseable', problem: 'the report reader is closed' });
    // Only what is read is copied to the thread: postMessage copies a view's whole ArrayBuffer, so a
    // view of a larger one (a decoded request body, Buffer's shared pool) is copied out of it first.
    const head = message.subarray(0, REPORT_BYTES_READ);
    const read = head.byteLength === head.buffer.byteLength ? head : new Uint8Array(head);
    return new Promise((resolve) => this.post(++this.calls, { message: read, resolve }));
  }

  /** Ends the thread; reports not yet read are unparseable. */
  async close(): Promise<void> {
    this.closed = true;
    const thread = this.thread;
    this.thread = undefined;
    await thread?.worker.terminate();
  }

  private post(call: number, waiting: Call): void {
    this.thread ??= this.start();
    const thread = this.thread;
    // An idle thread does not keep the process alive; one with mails to read does.
    if (thread.pending.size === 0) thread.worker.ref();
    thread.pending.set(call, waiting);
    thread.worker.postMessage({ call, message: waiting.message } satisfies ReportRequest);
  }

  private start(): Thread {
    const worker = startThread(new URL('./report-thread.ts', import.meta.url), { resourceLimits: this.limits });
    worker.unref();
    const thread: Thread = { worker, pending: new Map() };
    worker.on('message', ({ call, report }: ReportResponse) => {
      const waiting = thread.pending.get(call);
      if (!waiting) return;
      thread.pending.delete(call);
      if (thread.pending.size === 0) worker.unref();
      waiting.resolve(report);
    });
    let ended = false;
    const end = (problem: string) => {
      if (ended) return;
      ended = true;
      if (this.thread === thread) this.thread = undefined;
      const [first, ...behind] = thread.pending;
      thread.pending.clear();
      if (!first) return;
      // The thread reads one mail at a time: the first unanswered is the one it ended on.
      first[1].resolve({ kind: 'unparseable', problem });
      for (const [call, waiting] of behind)
        if (this.closed) waiting.resolve({ kind: 'unparseable', problem: 'the report reader is closed' });
        else this.post(call, waiting);
    };
    // Ended on exit only: an uncaught error is told before the answers the thread posted ahead of it,
    // which would otherwise be taken for the mails behind the one it failed on.
    let failure: string | undefined;
    worker.on('error', (error) => (failure = `the report reader failed: ${error.message}`));
    worker.on('exit', (code) => end(failure ?? `the report reader ended (code ${code})`));
    return thread;
  }
}

/** The process's reader: its thread starts with the first report and waits, unreferenced, when idle. */
const reader = new ReportReader();

export const parseMailReport = (message: Buffer) => reader.read(message);
