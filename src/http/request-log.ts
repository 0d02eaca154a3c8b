import type { FastifyRequest, FastifyServerOptions } from 'fastify';

/**
 * What a request line (Fastify's "incoming request", and the request of a 5xx) logs of the
 * request: its method and its route's pattern (`/t/c/:token`, `/contacts`), never the path
 * or the query string it came with. Paths carry capability tokens (tracking and short links:
 * whoever reads the log could click, open or unsubscribe as the recipient) and query strings
 * people's addresses and numbers (`/contacts?email=…`). A request that matched no route logs
 * no path at all.
 */
function requestLine(request: FastifyRequest) {
  return { method: request.method, url: request.routeOptions?.url ?? '(no route)', remoteAddress: request.ip };
}

/** Fastify's `logger` option with the request serializer above: every app the service builds logs its requests so. */
export function requestLogging(logger: FastifyServerOptions['logger']): FastifyServerOptions['logger'] {
  if (!logger) return false;
  const options = logger === true ? {} : logger;
  return { ...options, serializers: { ...options.serializers, req: requestLine } };
}
