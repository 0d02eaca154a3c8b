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

/**
 * One POST to a vetted destination, connecting only to its vetted addresses. The answer's
 * body is read and dropped (it means nothing to Standard Webhooks) so that the timeout
 * covers the whole exchange and the socket can be reused. Redirects are not followed:
 * Node's client never does, and a 3xx is the caller's to judge.
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
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  return new Promise<Answer>((resolve, reject) => {
    const fail = (error: Error) =>
      reject(
        abort.signal.aborted ? new PostTimeout(`timed out: no complete answer within ${timeoutMs / 1000} s`) : error,
      );
    const request = send(
      target,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        lookup: pinnedLookup(addresses),
        signal: AbortSignal.any([abort.signal, stop]),
      },
      (response) => {
        response.on('error', fail);
        response.on('end', () => resolve({ statusCode: response.statusCode ?? 0, headers: response.headers }));
        response.resume();
      },
    );
    request.on('error', fail);
    request.end(body);
  }).finally(() => clearTimeout(timer));
}
