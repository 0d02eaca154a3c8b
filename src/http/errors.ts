import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, type FieldError } from '../errors.ts';

interface ValidationIssue {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
}

/** `/recipients/3/mobileNo` → `recipients[3].mobileNo`, the field-path form of the error shape. */
export function fieldPath(pointer: string, extra?: string): string {
  const parts = pointer.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (extra !== undefined) parts.push(extra);
  return parts.reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), '');
}

function describe(issue: ValidationIssue): FieldError {
  switch (issue.keyword) {
    case 'required':
      return { field: fieldPath(issue.instancePath, String(issue.params.missingProperty)), message: 'is required' };
    case 'additionalProperties':
      return { field: fieldPath(issue.instancePath, String(issue.params.additionalProperty)), message: 'is not a known field' };
    case 'enum':
      return { field: fieldPath(issue.instancePath), message: `must be one of ${(issue.params.allowedValues as unknown[]).join(', ')}` };
    case 'minProperties':
      return { field: fieldPath(issue.instancePath) || '(body)', message: 'must not be empty' };
    default:
      return { field: fieldPath(issue.instancePath) || '(body)', message: issue.message ?? 'is not valid' };
  }
}

// Fastify's own client errors, by code, with the status and sentence the contract gives them.
const FASTIFY_ERRORS: Record<string, [number, string]> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'The body must be sent as application/json or application/json-patch+json.'],
  FST_ERR_CTP_INVALID_TYPE: [415, 'The body must be sent as application/json or application/json-patch+json.'],
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'The body is larger than this server accepts.'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'The body is empty; send a JSON object.'],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'The body is not valid JSON.'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'The Content-Length header does not match the body.'],
};

function toContract(error: FastifyError | AppError): { statusCode: number; body: Record<string, unknown>; headers: Record<string, string> } {
  if (error instanceof AppError) {
    const body: Record<string, unknown> = { status: 'Failure', message: error.message, errors: error.errors };
    if (error.data) body.data = error.data;
    return { statusCode: error.statusCode, body, headers: error.headers };
  }
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    const errors = (fastifyError.validation as ValidationIssue[]).map(describe);
    return { statusCode: 400, body: { status: 'Failure', message: 'The request is not valid.', errors }, headers: {} };
  }
  const known = fastifyError.code ? FASTIFY_ERRORS[fastifyError.code] : undefined;
  if (known) return { statusCode: known[0], body: { status: 'Failure', message: known[1], errors: [] }, headers: {} };
  if (error instanceof SyntaxError) {
    return { statusCode: 400, body: { status: 'Failure', message: 'The body is not valid JSON.', errors: [] }, headers: {} };
  }
  const status = fastifyError.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    return { statusCode: status, body: { status: 'Failure', message: fastifyError.message, errors: [] }, headers: {} };
  }
  return { statusCode: 500, body: { status: 'Failure', message: 'Internal server error.', errors: [] }, headers: {} };
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const { statusCode, body, headers } = toContract(error);
    if (statusCode >= 500) request.log.error({ err: error }, 'request failed');
    return reply.code(statusCode).headers(headers).type('application/json; charset=utf-8').send(body);
  });
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send({ status: 'Failure', message: `No route for ${request.method} ${request.url.split('?')[0]}.`, errors: [] }),
  );
}
