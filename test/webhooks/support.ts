import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Kysely } from 'kysely';
import type { Schema } from '../../src/db/schema.ts';
import { SnoozeJob, type Job, type JobHandler } from '../../src/queue/worker.ts';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** How the receiver answers one post: a status with headers, after delayMs if given, or never ('hang'). */
export type Reply = { status: number; headers?: Record<string, string>; delayMs?: number } | 'hang';

export interface Receiver {
  /** http://127.0.0.1:<port>/hooks */
  url: string;
  port: number;
  received: Received[];
  /** The most posts it has held open at once. */
  readonly mostAtOnce: number;
  /** Replies for the next posts, in order; once they run out, each post gets 200. */
  reply(...replies: Reply[]): void;
  /** Answers every post held by a 'hang' reply so far with `status`, now. */
  answerHung(status?: number): void;
  /** Resolves once `count` posts have arrived (their bodies read), answered or not. */
  posts(count: number): Promise<void>;
  close(): Promise<void>;
}

/** A real HTTP server on 127.0.0.1 that records every post it gets. */
export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const replies: Reply[] = [];
  const waiting: Array<{ count: number; arrived: () => void }> = [];
  const hung: ServerResponse[] = [];
  let open = 0;
  let mostAtOnce = 0;
  const server = createServer((request, response) => {
    mostAtOnce = Math.max(mostAtOnce, ++open);
    response.on('close', () => (open -= 1));
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      received.push({ headers: request.headers, body });
      for (const waiter of waiting.filter((w) => received.length >= w.count)) waiter.arrived();
      const reply = replies.shift() ?? { status: 200 };
      if (reply === 'hang') {
        hung.push(response);
        return;
      }
      setTimeout(() => response.writeHead(reply.status, reply.headers).end('{"ok":true}'), reply.delayMs ?? 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    port,
    received,
    get mostAtOnce() {
      return mostAtOnce;
    },
    reply: (...more) => replies.push(...more),
    answerHung: (status = 200) => {
      for (const response of hung.splice(0)) if (!response.destroyed) response.writeHead(status).end('{"ok":true}');
    },
    posts: (count) =>
      received.length >= count ? Promise.resolve() : new Promise((arrived) => waiting.push({ count, arrived })),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Runs one `webhook.deliver` job for the delivery (its current generation unless told):
 * 'done' when the handler completed the job, 'retry' when it asked the queue for another run.
 */
export async function runDeliveryJob(
  handler: JobHandler,
  db: Kysely<Schema>,
  deliveryId: string,
  generation?: number,
): Promise<'done' | 'retry'> {
  const row = await db
    .selectFrom('webhook_deliveries')
    .select('generation')
    .where('id', '=', deliveryId)
    .executeTakeFirstOrThrow();
  try {
    await handler.handle({ payload: { deliveryId, generation: generation ?? row.generation } } as unknown as Job, {
      signal: new AbortController().signal,
      lease: { id: 0, token: 'test' },
    });
    return 'done';
  } catch (error) {
    if (error instanceof SnoozeJob) return 'retry';
    throw error;
  }
}
