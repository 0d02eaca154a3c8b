import { Type } from 'typebox';
import { Uuid } from '../../http/schemas.ts';
import { SMSC_NAME, SMSC_NAME_RULE } from './connections.ts';

/** The bodies of the admin API's SMS routes (routes.ts), the routing table's also read by `herald routes set`. */

export const SmscName = Type.String({ pattern: SMSC_NAME.source, errorMessage: SMSC_NAME_RULE });

export const Connection = Type.Object({ name: Type.String(), url: Type.String() });
export const ConnectionState = Type.Object({
  ...Connection.properties,
  state: Type.Union([Type.Literal('up'), Type.Literal('down'), Type.Literal('sandbox')]),
  binds: Type.Integer({ description: 'Binds up, summed over the worker processes running' }),
});

export const Route = Type.Object({
  prefix: Type.String({
    pattern: '^[0-9]{0,15}$',
    description: 'Leading digits of the E.164 number; "" matches every number',
    errorMessage: 'must be up to 15 digits',
  }),
  smsc: Type.Array(SmscName, {
    minItems: 1,
    maxItems: 8,
    description: 'Connections, in the order a part tries them',
  }),
  pricePerPart: Type.Optional(Type.String({ maxLength: 20, description: 'A decimal string, such as "0.0075"' })),
  currency: Type.Optional(Type.String({ maxLength: 3, description: 'ISO 4217, with pricePerPart' })),
  accountId: Type.Optional(Uuid({ description: "A route of this account's only; unset, of every account" })),
});
export const RoutesBody = Type.Object({ routes: Type.Array(Route, { maxItems: 1000 }) });
