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
