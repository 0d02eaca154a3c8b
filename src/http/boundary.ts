import type { FastifyInstance, FastifyRequest } from 'fastify';
import { badRequest, unprocessable, type FieldError } from '../errors.ts';
import { annotatedStrings, hasAnnotation, inputProblems, type SchemaNode } from './input.ts';
import { registerJsonParser } from './json.ts';
import { closeSchema, NO_PARAMETERS } from './validation.ts';

interface RouteSchema {
  body?: SchemaNode;
  querystring?: SchemaNode;
  params?: SchemaNode;
  hide?: boolean;
}

const schemaOf = (request: FastifyRequest) => (request.routeOptions.schema ?? {}) as RouteSchema;

function noBodyProblems(body: unknown): FieldError[] {
  if (body === undefined) return [];
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    return Object.keys(body).map((field) => ({ field, message: 'is not a known field; this request takes no body' }));
  }
  return [{ field: '(body)', message: 'must be empty; this request takes no body' }];
}

/** The longest webhook URL a request may name, and the longest kept once its credentials are sealed. */
export const WEBHOOK_URL_MAX_LENGTH = 2048;

/**
 * What every route gets at the HTTP boundary, once, so that no module has to remember it
 * (issue 10): one JSON parser; request schemas closed to unknown fields, in bodies and
 * query strings alike; control characters, broken Unicode, prototype keys and deep nesting
 * refused in every string of the body, query string and path, before validation; and every
 * webhook URL field vetted after validation, once the caller is known, with 422, then given to
 * the route with its password, if any, sealed.
 */
export function registerBoundary(
  app: FastifyInstance,
  webhookUrls: { refusal: (url: string) => Promise<string | undefined>; kept: (url: string) => Promise<string> },
): void {
  registerJsonParser(app);

  async function vetWebhookUrls(request: FastifyRequest): Promise<void> {
    const errors: FieldError[] = [];
    const urls = annotatedStrings(request.body, schemaOf(request).body, 'x-webhook-url');
    for (const { field, value } of urls) {
      const refusal = await webhookUrls.refusal(value);
      if (refusal) errors.push({ field, message: refusal });
    }
    if (errors.length > 0) throw unprocessable('The service will not post webhooks to this URL.', errors);
    // As the route will keep it: the credentials in the URL sealed (url-password.ts), which
    // lengthens it. Sealed repeatably under a key kept for good, so an Idempotency-Key's replay
    // hashes the same body.
    const kept = await Promise.all(urls.map(({ value }) => webhookUrls.kept(value)));
    for (const [i, { field }] of urls.entries()) {
      if (kept[i].length > WEBHOOK_URL_MAX_LENGTH)
        errors.push({
          field,
          message: `is longer than ${WEBHOOK_URL_MAX_LENGTH} characters once its password is sealed`,
        });
    }
    if (errors.length > 0) throw unprocessable('The service cannot keep this webhook URL.', errors);
    for (const [i, { replace }] of urls.entries()) replace(kept[i]);
  }

  app.addHook('onRoute', (route) => {
    const schema = route.schema as RouteSchema | undefined;
    if (schema?.hide) return;
    route.schema = {
      ...schema,
      querystring: schema?.querystring ? closeSchema(schema.querystring) : NO_PARAMETERS,
      ...(schema?.body ? { body: closeSchema(schema.body) } : {}),
      ...(schema?.params ? { params: closeSchema(schema.params) } : {}),
    };
    // Only the routes that take a webhook URL pay for the hook: a lookup, after validation
    // and authentication, so an anonymous or malformed request never makes the server ask DNS.
    if (hasAnnotation(schema?.body, 'x-webhook-url'))
      route.preHandler = [vetWebhookUrls, ...[route.preHandler ?? []].flat()];
  });

  app.addHook('preValidation', async (request) => {
    // No route, no inputs to check: an unknown path is a 404 whatever its query holds.
    if (request.is404) return;
    const schema = schemaOf(request);
    lowerCaseUuids(request.params as Record<string, unknown>, schema.params);
    const errors = [
      ...inputProblems(request.params, schema.params),
      ...inputProblems(request.query, schema.querystring),
      ...(schema.body || schema.hide ? inputProblems(request.body, schema.body) : noBodyProblems(request.body)),
    ];
    if (errors.length > 0) throw badRequest('The request is not valid.', errors);
  });
}

/**
 * Path parameters that are UUIDs (format `uuid`, which takes capitals) in lower case, as every
 * id is kept: `GET /sms/6F1C…` finds what `GET /sms/6f1c…` finds, on every route alike.
 */
function lowerCaseUuids(params: Record<string, unknown> | undefined, schema: unknown): void {
  const properties = (schema as { properties?: Record<string, { format?: string }> } | undefined)?.properties;
  if (!params || !properties) return;
  for (const [name, property] of Object.entries(properties)) {
    const value = params[name];
    if (property.format === 'uuid' && typeof value === 'string') params[name] = value.toLowerCase();
  }
}
