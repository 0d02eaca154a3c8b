/**
 * The simulators' control port: plain node:http, JSON in and out, a table of routes by
 * `METHOD /path` that each simulator supplies (docs/operations.md: "SMSC simulator", "SMTP sink").
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';

/** What a route answers: a status and, unless it has none (204), a JSON body. */
export interface Answer {
  status: number;
  body?: unknown;
}

/** Handlers by `METHOD /path`, the query string left in the URL for them to read. */
export type Routes = Record<string, (request: IncomingMessage, url: URL) => Answer | Promise<Answer>>;

const MAX_BODY_BYTES = 65536;

/** A request the route cannot take: answered 400 with its message. */
export class BadRequest extends Error {}

function reply(response: ServerResponse, { status, body }: Answer): void {
  if (body === undefined) {
    response.writeHead(status).end();
    return;
  }
  const json = JSON.stringify(body);
  response
    .writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) })
    .end(json);
}

/** The request's body as a JSON object, or BadRequest. */
export async function readJson(request: IncomingMessage): Promise<Record<string, unknown>> {
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
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new BadRequest('the body must be a JSON object');
  return body as Record<string, unknown>;
}

/** A required (or optional) non-empty string field of a JSON body. */
export function text(body: Record<string, unknown>, field: string, required: boolean): string | undefined {
  const value = body[field];
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string' || value === '') throw new BadRequest(`${field} must be a non-empty string`);
  return value;
}

export async function startControl(options: { host: string; port: number; routes: Routes }) {
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://simulator');
    const to = `${request.method} ${url.pathname}`;
    const route = Object.hasOwn(options.routes, to) ? options.routes[to] : undefined;
    if (!route) return reply(response, { status: 404, body: { error: `no route ${to}` } });
    Promise.resolve()
      .then(() => route(request, url))
      .then(
        (answer) => reply(response, answer),
        (error: unknown) =>
          reply(
            response,
            error instanceof BadRequest
              ? { status: 400, body: { error: error.message } }
              : { status: 500, body: { error: String(error) } },
          ),
      );
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
