/**
 * The console is one more client of the public API: it calls the same paths as a bearer
 * client, authenticated by the session cookie instead, and every change carries the session's
 * CSRF token. The token lives in this module only, never in storage a script could read later.
 */
let csrfToken: string | null = null;
let onSignedOut: () => void = () => {};

export function setCsrfToken(token: string | null): void {
  csrfToken = token;
}

/** Called when a request answers 401: the session ended (expired, signed out elsewhere). */
export function whenSignedOut(handler: () => void): void {
  onSignedOut = handler;
}

/** The contract's error body: `{status: "Failure", message, errors: [{field, message}]}`. */
export class ApiError extends Error {
  readonly status: number;
  readonly fields: Array<{ field: string; message: string }>;
  constructor(status: number, message: string, fields: Array<{ field: string; message: string }>) {
    super(message);
    this.status = status;
    this.fields = fields;
  }
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

async function failure(response: Response): Promise<ApiError> {
  const body = (await response.json().catch(() => null)) as { message?: string; errors?: ApiError['fields'] } | null;
  return new ApiError(response.status, body?.message ?? `The server answered ${response.status}.`, body?.errors ?? []);
}

/**
 * A request to the API; the JSON answer, or undefined for a 204. `session`: a sign-in call, whose
 * 401 is an answer, not an ended session.
 */
export async function request<T>(
  method: Method,
  path: string,
  body?: unknown,
  options: { session?: boolean } = {},
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrfToken !== null) headers['x-csrf-token'] = csrfToken;
  const response = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401 && !options.session) onSignedOut();
  if (!response.ok) throw await failure(response);
  return (response.status === 204 ? undefined : await response.json()) as T;
}

export const get = <T>(path: string) => request<T>('GET', path);

/** A path with its query string, leaving out absent values. */
export function withQuery(path: string, query: Record<string, string | number | null | undefined>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query))
    if (value !== undefined && value !== null && value !== '') params.set(key, String(value));
  const text = params.toString();
  return text === '' ? path : `${path}?${text}`;
}
