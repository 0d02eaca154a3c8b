import type { FastifyInstance, FastifyRequest } from 'fastify';
import { badRequest } from '../errors.ts';

// fatal: invalid UTF-8 is an error, not U+FFFD: a replacement character stored in place of
// bytes the client sent is a silent change of their data (issue 10: "\ufffd\ufffd@x.co").
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The one JSON body parser, for application/json and the spec samples'
 * application/json-patch+json. An empty body is no body (undefined): a route that takes
 * none goes on (DELETE with a JSON content type), one that takes one answers "the body is
 * empty" from its schema. JSON.parse makes a `__proto__` key an own property, never a
 * prototype; the boundary check (input.ts) then refuses such keys by path, before any
 * code reads the body.
 */
function parseJson(_request: FastifyRequest, body: Buffer): unknown {
  if (body.length === 0) return undefined;
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw badRequest('The body is not valid UTF-8; send JSON encoded as UTF-8.');
  }
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw badRequest(`The body is not valid JSON: ${(error as Error).message}.`);
  }
}

/** The media types a body may be sent as: the spec's samples send the second. */
export const JSON_MEDIA_TYPES = ['application/json', 'application/json-patch+json'] as const;

export function registerJsonParser(app: FastifyInstance): void {
  // text/plain is dropped so that every other type is a 415, not a string body.
  app.removeAllContentTypeParsers();
  for (const type of JSON_MEDIA_TYPES) {
    app.addContentTypeParser(type, { parseAs: 'buffer' }, async (request: FastifyRequest, body: Buffer) =>
      parseJson(request, body),
    );
  }
}
