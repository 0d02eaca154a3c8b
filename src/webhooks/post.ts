import type { LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { pinnedLookup } from './destination.ts';

export interface Answer {
  statusCode: number;
  headers: IncomingHttpHeaders;
}

/** The receiver did not finish answering in time. */
export class PostTimeout extends Error {}

/** How much of an answer's body is read: it means nothing, and a receiver may send a gigabyte. */
const ANSWER_BYTES_READ = 64 * 1024;

/**
 * One POST to a vetted destination, connecting only to its vetted addresses. The answer's
 * body is read and dropped (it means nothing to Standard Webhooks), up to ANSWER_BYTES_READ, so
 * that the timeout covers the whole exchange and the socket can be reused. Redirects are not
 * followed: Node's client never does, and a 3xx is the caller's to judge. It settles by the
 * timeout whatever the receiver does: a 101 Switching Protocols, which Node hands to an
 * `upgrade` listener and not to the answer's, left it waiting for ever.
 */
export function post(
  target: URL,
  addresses: LookupAddress[],
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
  stop: AbortSignal,
): Promise<Answer> {
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  return new Promise<Answer>((resolve, reject) => {
    const timedOut = new PostTimeout(`timed out: no complete answer within ${timeoutMs / 1000} s`);
    timer = setTimeout(() => {
      abort.abort();
      reject(timedOut);
    }, timeoutMs);
    const fail = (error: Error) => reject(abort.signal.aborted ? timedOut : error);
    const request = send(
      target,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        lookup: pinnedLookup(addresses),
        signal: AbortSignal.any([abort.signal, stop]),
      },
      (response) => {
        const answer = { statusCode: response.statusCode ?? 0, headers: response.headers };
        let read = 0;
        response.on('error', fail);
        response.on('end', () => resolve(answer));
        response.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read <= ANSWER_BYTES_READ) return;
          resolve(answer);
          response.destroy();
        });
      },
    );
    request.on('upgrade', (response, socket) => {
      socket.destroy();
      resolve({ statusCode: response.statusCode ?? 101, headers: response.headers });
    });
    request.on('error', fail);
    request.end(body);
  }).finally(() => clearTimeout(timer));
}
