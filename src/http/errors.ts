import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, vanished } from '../errors.ts';
import { isForeignKeyViolation } from '../db/errors.ts';
import { describeIssues, type ValidationIssue } from './validation.ts';

// Fastify's own client errors, by code, with the status and sentence the contract gives them.
const FASTIFY_ERRORS: Record<string, [number, string]> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'The body must be sent as application/json or application/json-patch+json.'],
  FST_ERR_CTP_INVALID_TYPE: [415, 'The body must be sent as application/json or application/json-patch+json.'],
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'The body is larger than this server accepts.'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'The Content-Length header does not match the body.'],
  FST_ERR_BAD_URL: [400, 'The path is not valid: it holds a percent-escape that is not UTF-8.'],
};

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The `data` every 400 of the route carries where its own checks give none (its schema's,
     * a body that is not JSON): the contact batch's arrays (SPEC §7) on every refusal.
     */
    refusalData?: Record<string, unknown>;
  }
}

type Contract = { statusCode: number; body: Record<string, unknown>; headers: Record<string, string> };

const failure = (statusCode: number, message: string, errors: unknown[] = []): Contract => ({
  statusCode,
  body: { status: 'Failure', message, errors },
  headers: {},
});

function toContract(error: FastifyError | AppError, request: FastifyRequest): Contract {
  const contract = contractOf(error, request);
  const data = request.routeOptions.config?.refusalData;
  if (!data || contract.statusCode !== 400 || 'data' in contract.body) return contract;
  return { ...contract, body: { ...contract.body, data } };
}

function contractOf(error: FastifyError | AppError, request: FastifyRequest): Contract {
  if (error instanceof AppError) {
    const body: Record<string, unknown> = { status: 'Failure', message: error.message, errors: error.errors };
    if (error.data) body.data = error.data;
    return { statusCode: error.statusCode, body, headers: error.headers };
  }
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    if (fastifyError.validationContext === 'body' && request.body === undefined)
      return failure(400, 'The body is empty; send a JSON object.');
    return failure(400, 'The request is not valid.', describeIssues(fastifyError.validation as ValidationIssue[]));
  }
  if (isForeignKeyViolation(error)) return contractOf(vanished(), request);
  const known = fastifyError.code ? FASTIFY_ERRORS[fastifyError.code] : undefined;
  if (known) return failure(known[0], known[1]);
  const status = fastifyError.statusCode ?? 500;
  if (status >= 400 && status < 500) return failure(status, fastifyError.message);
  return failure(500, 'Internal server error.');
}

const send = (reply: FastifyReply, { statusCode, body, headers }: Contract) =>
  reply.code(statusCode).headers(headers).type('application/json; charset=utf-8').send(body);

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const contract = toContract(error, request);
    if (contract.statusCode >= 500) request.log.error({ err: error }, 'request failed');
    return send(reply, contract);
  });
  app.setNotFoundHandler((request, reply) =>
    reply
      .code(404)
      .send({ status: 'Failure', message: `No route for ${request.method} ${request.url.split('?')[0]}.`, errors: [] }),
  );
}

/**
 * Fastify's `clientErrorHandler` option: a request Node's HTTP parser refused (a NUL in a header,
 * a body shorter than its Content-Length, a bad chunk, headers over 16 KB) answered in the
 * contract's shape, as a raw response, since there is no request to reply to; then the
 * connection is closed.
 */
export function clientErrors(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
  const status = tooLarge ? 431 : 400;
  const message = tooLarge ? 'The request’s headers are too large.' : 'The request is not well-formed HTTP.';
  const body = JSON.stringify({ status: 'Failure', message, errors: [] });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/** Fastify's `frameworkErrors` option: errors raised before routing (a path that is not UTF-8) in the same shape. */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  void send(reply, toContract(error, request));
}
