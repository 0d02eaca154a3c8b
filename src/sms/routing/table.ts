import type { Kysely } from 'kysely';
import type { Schema } from '../../db/schema.ts';
import { badRequest, unprocessable, type FieldError } from '../../errors.ts';
import { amountOf, isCurrency, microsOf } from '../../messaging/money.ts';
import { DEFAULT_SMSC } from '../transport.ts';
import { bumpRoutingVersion } from './version.ts';

/** A route as PUT /admin/sms-routes takes it and GET answers it (ARCHITECTURE.md, "SMS routes (operator)"). */
export interface SmsRoute {
  prefix: string;
  smsc: string[];
  pricePerPart?: string;
  currency?: string;
  accountId?: string;
}

/** A route as the sender matches it. */
export interface RouteRow {
  accountId: string | null;
  prefix: string;
  smsc: string[];
  priceMicros: number | null;
  currency: string | null;
}

/**
 * Replaces the routing table (PUT /admin/sms-routes), all or nothing: every connection a route
 * names must exist (`default` always does), every account it is for too (422); a price comes
 * with its currency, and one account has one route per prefix (400).
 */
export async function replaceRoutes(db: Kysely<Schema>, routes: SmsRoute[]): Promise<SmsRoute[]> {
  const rows = routes.map(rowOf);
  const errors = routes.flatMap(shapeErrors);
  const seen = new Set<string>();
  rows.forEach((row, i) => {
    const key = `${row.accountId ?? ''}:${row.prefix}`;
    if (seen.has(key)) {
      errors.push({ field: `routes[${i}].prefix`, message: 'another route for the same accounts has this prefix' });
    }
    seen.add(key);
  });
  if (errors.length > 0) throw badRequest('The routing table is not valid.', errors);
  await db.transaction().execute(async (trx) => {
    await bumpRoutingVersion(trx);
    const accountIds = [...new Set(rows.flatMap((row) => (row.accountId === null ? [] : [row.accountId])))];
    const connections = await trx.selectFrom('smsc_connections').select('name').execute();
    const accounts =
      accountIds.length === 0
        ? []
        : await trx.selectFrom('accounts').select('id').where('id', 'in', accountIds).execute();
    const known = new Set([DEFAULT_SMSC, ...connections.map((row) => row.name)]);
    const existing = new Set(accounts.map((row) => row.id));
    const unknown: FieldError[] = rows.flatMap((row, i) => [
      ...row.smsc.flatMap((name, j) =>
        known.has(name) ? [] : [{ field: `routes[${i}].smsc[${j}]`, message: `no connection is named "${name}"` }],
      ),
      ...(row.accountId === null || existing.has(row.accountId)
        ? []
        : [{ field: `routes[${i}].accountId`, message: 'no account has this id' }]),
    ]);
    if (unknown.length > 0)
      throw unprocessable('A route names a connection or an account that does not exist.', unknown);
    await trx.deleteFrom('sms_routes').execute();
    if (rows.length > 0) {
      await trx
        .insertInto('sms_routes')
        .values(
          rows.map((row, position) => ({
            position,
            account_id: row.accountId,
            prefix: row.prefix,
            smsc: JSON.stringify(row.smsc),
            price_micros: row.priceMicros,
            currency: row.currency,
          })),
        )
        .execute();
    }
  });
  return rows.map(viewOf);
}

/** The routing table, in the order it was given. */
export async function readRoutes(db: Kysely<Schema>): Promise<RouteRow[]> {
  const rows = await db.selectFrom('sms_routes').selectAll().orderBy('position').execute();
  return rows.map((row) => ({
    accountId: row.account_id,
    prefix: row.prefix,
    smsc: JSON.parse(row.smsc) as string[],
    priceMicros: row.price_micros === null ? null : Number(row.price_micros),
    currency: row.currency,
  }));
}

export function viewOf(row: RouteRow): SmsRoute {
  return {
    prefix: row.prefix,
    smsc: row.smsc,
    ...(row.priceMicros === null || row.currency === null
      ? {}
      : { pricePerPart: amountOf(row.priceMicros), currency: row.currency }),
    ...(row.accountId === null ? {} : { accountId: row.accountId }),
  };
}

function rowOf(route: SmsRoute): RouteRow {
  return {
    accountId: route.accountId ?? null,
    prefix: route.prefix,
    smsc: route.smsc,
    priceMicros: route.pricePerPart === undefined ? null : (microsOf(route.pricePerPart) ?? null),
    currency: route.currency ?? null,
  };
}

/** What the body's schema cannot say: a price and its currency together, each well formed; no connection twice. */
function shapeErrors(route: SmsRoute, i: number): FieldError[] {
  const errors: FieldError[] = [];
  const field = (name: string) => `routes[${i}].${name}`;
  if ((route.pricePerPart === undefined) !== (route.currency === undefined)) {
    errors.push({ field: field('currency'), message: 'pricePerPart and currency come together or not at all' });
  }
  if (route.pricePerPart !== undefined && microsOf(route.pricePerPart) === undefined) {
    errors.push({
      field: field('pricePerPart'),
      message: 'must be a decimal string of at most 6 decimals, from 0 to 99999.999999, such as "0.0075"',
    });
  }
  if (route.currency !== undefined && !isCurrency(route.currency)) {
    errors.push({
      field: field('currency'),
      message: 'must be an ISO 4217 code: three capital letters, such as "EUR"',
    });
  }
  if (new Set(route.smsc).size !== route.smsc.length) {
    errors.push({ field: field('smsc'), message: 'names a connection twice' });
  }
  return errors;
}

/**
 * The routes compiled for matching: per account (or '' for those of every account), each prefix's
 * route, and the lengths its prefixes have, longest first. A number's route is then one lookup
 * per length in use, its own account's before the rest's.
 */
export class RoutingTable {
  private readonly byScope = new Map<string, Scope>();

  constructor(rows: readonly RouteRow[]) {
    for (const row of rows) {
      const key = row.accountId ?? '';
      const scope = this.byScope.get(key) ?? { prefixes: new Map<string, RouteRow>(), lengths: [] };
      scope.prefixes.set(row.prefix, row);
      if (!scope.lengths.includes(row.prefix.length)) scope.lengths.push(row.prefix.length);
      this.byScope.set(key, scope);
    }
    for (const scope of this.byScope.values()) scope.lengths.sort((a, b) => b - a);
  }

  /**
   * Among the account's own routes, the one with the longest prefix of the number; if none, the
   * longest among the routes for every account; undefined if none matches.
   */
  routeFor(accountId: string, address: string): RouteRow | undefined {
    return longestMatch(this.byScope.get(accountId), address) ?? longestMatch(this.byScope.get(''), address);
  }
}

interface Scope {
  prefixes: Map<string, RouteRow>;
  /** The lengths of its prefixes, longest first. */
  lengths: number[];
}

function longestMatch(scope: Scope | undefined, address: string): RouteRow | undefined {
  if (!scope) return undefined;
  for (const length of scope.lengths) {
    if (length > address.length) continue;
    const route = scope.prefixes.get(address.slice(0, length));
    if (route) return route;
  }
  return undefined;
}

/**
 * Whether a number no route matches goes to `default`: unless connections were added and
 * SMS_TRANSPORT is unset (then it fails, `no route`). The send and its dry run both ask.
 */
export const unroutedToDefault = (c: { anyAdded: boolean; defaultSet: boolean }): boolean =>
  !c.anyAdded || c.defaultSet;
