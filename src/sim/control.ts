/**
 * The simulator's control port: plain node:http, five routes, JSON in and out.
 *
 *   GET  /messages?recipient=   what it took, reassembled, oldest first
 *   GET  /stats                 counters
 *   POST /mo {from, to, text, systemId?}   an MO message to a bound receiver (409 if none)
 *   POST /reset                 forgets what it took and zeroes the counters
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import type { MessageView } from './taken.ts';

export interface ControlHandlers {
  received(recipient?: string): MessageView[];
  arrivals(): Array<[string, number]>;
  stats(): unknown;
  sendMo(request: { from: string; to: string; text: string; systemId?: string }): boolean;
  reset(): void;
}

const MAX_BODY_BYTES = 65536;

class BadRequest extends Error {}

function reply(response: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    response.writeHead(status).end();
    return;
  }
  const json = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) }).end(json);
}

async function readJson(request: IncomingMessage): Promise<Record<string, unknown>> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new BadRequest(`the body is over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new BadRequest('the body is not JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new BadRequest('the body must be a JSON object');
  return body as Record<string, unknown>;
}

function text(body: Record<string, unknown>, field: string, required: boolean): string | undefined {
  const value = body[field];
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string' || value === '') throw new BadRequest(`${field} must be a non-empty string`);
  return value;
}

async function route(handlers: ControlHandlers, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://simulator');
  const to = `${request.method} ${url.pathname}`;
  switch (to) {
    case 'GET /messages':
      return reply(response, 200, { messages: handlers.received(url.searchParams.get('recipient') ?? undefined) });
    case 'GET /arrivals':
      return reply(response, 200, { arrivals: handlers.arrivals() });
    case 'GET /stats':
      return reply(response, 200, handlers.stats());
    case 'POST /mo': {
      const body = await readJson(request);
      const mo = { from: text(body, 'from', true)!, to: text(body, 'to', true)!, text: text(body, 'text', true)!, systemId: text(body, 'systemId', false) };
      let sent: boolean;
      try {
        sent = handlers.sendMo(mo);
      } catch (error) {
        if (error instanceof RangeError) throw new BadRequest(error.message); // a text beyond 255 parts
        throw error;
      }
      return sent ? reply(response, 202, { sent: true }) : reply(response, 409, { error: 'no bind can receive it: bind a receiver or transceiver first' });
    }
    case 'POST /reset':
      handlers.reset();
      return reply(response, 204);
    default:
      return reply(response, 404, { error: `no route ${to}` });
  }
}

export async function startControl(options: { host: string; port: number } & ControlHandlers) {
  const server = createServer((request, response) => {
    route(options, request, response).catch((error: unknown) => {
      if (error instanceof BadRequest) reply(response, 400, { error: error.message });
      else reply(response, 500, { error: String(error) });
    });
  });
  server.listen(options.port, options.host);
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
