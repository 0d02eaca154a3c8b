import { Type } from 'typebox';

/** The contract's error body (ARCHITECTURE.md), referenced by every route's responses for the docs. */
export const ErrorBody = Type.Object(
  {
    status: Type.Literal('Failure'),
    message: Type.String(),
    errors: Type.Array(Type.Object({ field: Type.String(), message: Type.String() })),
    data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { $id: 'ErrorBody', description: 'The one error shape of every endpoint.' },
);

export const errorResponses = (...codes: number[]) =>
  Object.fromEntries(codes.map((code) => [code, Type.Ref('ErrorBody')]));

/** A UUID, in a body, a query string or a path. */
export const Uuid = (options: { description?: string } = {}) =>
  Type.String({
    format: 'uuid',
    errorMessage: 'must be a UUID (32 hexadecimal digits in groups of 8-4-4-4-12)',
    ...options,
  });

/**
 * A page size in a query string: query strings arrive as text and the app's validator does
 * not coerce, so the number is a pattern of digits; `max` is a power of ten.
 */
export function PageLimit(max: 10 | 100 | 1000, byDefault: number, what: string) {
  const digits = String(max).length - 1;
  return Type.String({
    pattern: `^([1-9][0-9]{0,${digits - 1}}|${max})$`,
    description: `${what} per page, 1 to ${max}; ${byDefault} by default.`,
    errorMessage: `must be 1 to ${max}`,
  });
}

/** The nextCursor of a previous page, given back as it was. */
export const PageCursor = (maxLength: number) =>
  Type.String({
    maxLength,
    description: 'nextCursor of the previous page.',
    errorMessage: 'must be a nextCursor from a previous page',
  });

/** Text that may run over several lines: tabs and line breaks allowed, other control characters not (http/input.ts). */
export const MultilineText = (options: { maxLength: number; description?: string }) =>
  Type.String({ ...options, 'x-multiline': true });
