/**
 * Every error a client can cause, by name. Domain code throws these; the one error
 * handler in http/errors.ts turns them into the contract's error shape
 * (ARCHITECTURE.md, "HTTP interface"): { status: "Failure", message, errors[] }.
 */
export interface FieldError {
  field: string;
  message: string;
}

export class AppError extends Error {
  readonly statusCode: number;
  readonly errors: FieldError[];
  readonly headers: Record<string, string>;
  /** Extra top-level `data` in the error body (the contact batch's InvalidProperties/InvalidContactIds). */
  readonly data: Record<string, unknown> | undefined;
  constructor(
    statusCode: number,
    message: string,
    options: { errors?: FieldError[]; headers?: Record<string, string>; data?: Record<string, unknown> } = {},
  ) {
    super(message);
    this.statusCode = statusCode;
    this.errors = options.errors ?? [];
    this.headers = options.headers ?? {};
    this.data = options.data;
  }
}

/**
 * An AppError as plain data, for where only plain data goes: SQLite's thread, and a group's
 * answers (http/idempotency.ts, Refusal). appErrorOf makes it the error again.
 */
export interface AppErrorData {
  message: string;
  statusCode: number;
  errors: FieldError[];
  headers: Record<string, string>;
  data: Record<string, unknown> | undefined;
}

export const appErrorData = ({ message, statusCode, errors, headers, data }: AppError): AppErrorData => ({
  message,
  statusCode,
  errors,
  headers,
  data,
});

export const appErrorOf = (data: AppErrorData): AppError => new AppError(data.statusCode, data.message, data);

export const badRequest = (message: string, errors: FieldError[] = []) => new AppError(400, message, { errors });

export const invalidCredentials = () => new AppError(401, 'The user name, password or private token is incorrect.');

export const invalidToken = (reason: string) =>
  new AppError(401, `The access token is not valid: ${reason}.`, {
    headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
  });

export const invalidApiKey = (reason: string) =>
  new AppError(401, `The API key is not valid: ${reason}.`, {
    headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
  });

/** A key outside the route's scopes; `[]`: a route no key may call (keys never manage keys). */
export const scopeRefused = (scopes: readonly string[]) =>
  new AppError(
    403,
    scopes.length === 0
      ? 'An API key cannot call this route: use an access token from /token or the console.'
      : `This API key's scopes do not allow this route: it needs ${scopes.map((s) => `"${s}"`).join(' or ')}.`,
    { headers: { 'www-authenticate': `Bearer error="insufficient_scope", scope="${scopes.join(' ')}"` } },
  );

export const missingToken = () =>
  new AppError(401, 'An access token is required: send Authorization: Bearer <token>.', {
    // RFC 6750 §3.1: a request with no credentials gets the challenge without an error code.
    headers: { 'www-authenticate': 'Bearer' },
  });

export const adminUnauthorized = () =>
  new AppError(401, 'The admin token is missing or wrong.', { headers: { 'www-authenticate': 'Bearer' } });

export const consoleSessionEnded = () =>
  new AppError(401, 'The console session has ended or was never opened: sign in again.');

export const csrfRefused = () =>
  new AppError(403, 'A change made under a console session needs the X-CSRF-Token header the sign-in gave.');

export const notFound = (what: string) => new AppError(404, `${what} was not found.`);

export const conflict = (message: string, errors: FieldError[] = []) => new AppError(409, message, { errors });

/** A request whose rows could not be written: something they name was deleted while it ran. */
export const vanished = () =>
  conflict(
    'A record this request names (its account, a list, a contact) was deleted while it ran; nothing was written.',
  );

export const unprocessable = (message: string, errors: FieldError[] = [], data?: Record<string, unknown>) =>
  new AppError(422, message, { errors, data });

/** A send request its checks refused (`what`: "SMS request", "email batch"): 422 with every problem. */
export const sendRejected = (what: string, errors: FieldError[]) =>
  unprocessable(
    `The ${what} was rejected with ${errors.length} problem${errors.length === 1 ? '' : 's'}; nothing was queued.`,
    errors,
  );

export const tooManyRequests = (message: string, retryAfterSeconds: number) =>
  new AppError(429, message, { headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) } });
