import { AjvCompiler, type Ajv } from '@fastify/ajv-compiler';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;

/** A compiler of one kind: a route's schema in, its validator or serializer out. */
type Compile<Compiled> = (route: { schema: object }) => Compiled;

/**
 * Compiled functions by their schema's JSON and the shared schemas and options they were
 * compiled under: as many as the route modules have distinct schemas.
 */
function cached<Compiled>(cache: Map<string, Compiled>, under: string, compile: Compile<Compiled>): Compile<Compiled> {
  return (route) => {
    const key = `${under}\n${JSON.stringify(route.schema)}`;
    let compiled = cache.get(key);
    if (compiled === undefined) {
      compiled = compile(route);
      cache.set(key, compiled);
    }
    return compiled;
  };
}

const validators = new Map<string, unknown>();
const serializers = new Map<string, unknown>();

/**
 * Fastify's own validator (Ajv) and serializer (fast-json-stringify) compilers, with what they
 * compile kept for the process: an app built again (every API test builds one) reuses what an
 * earlier build compiled, where compiling every route's schemas anew was three fifths of an API
 * test's CPU. Keyed by the schema's JSON, since the route modules make their schema objects anew
 * for each app. A compiled function depends only on its schema, the shared schemas and the
 * options, which key it; it keeps no state of an app.
 */
export function schemaCompilers(): CompilersFactory {
  const buildAjv = AjvCompiler();
  return {
    buildValidator: sharing(validators, (externalSchemas: Parameters<typeof buildAjv>[0], options) =>
      buildAjv(externalSchemas, { ...options, onCreate: formatsAsTheRoutesReadThem }),
    ) as CompilersFactory['buildValidator'],
    buildSerializer: sharing(serializers, SerializerSelector()) as CompilersFactory['buildSerializer'],
  };
}

/** A factory of compilers that keep what they compile in `cache`, under the shared schemas and options they serve. */
function sharing<External, Options>(
  cache: Map<string, unknown>,
  build: (externalSchemas: External, options: Options) => unknown,
): (externalSchemas: External, options: Options) => Compile<unknown> {
  return (externalSchemas, options) =>
    cached(cache, JSON.stringify([externalSchemas, options]), build(externalSchemas, options) as Compile<unknown>);
}

function formatsAsTheRoutesReadThem(ajv: Ajv): void {
  dateTimesDateParseReads(ajv);
  urisUrlParses(ajv);
}

/**
 * `format: "uri"` (webhook URLs) as ajv-formats checks it (RFC 3986), and also one that the
 * WHATWG URL parser reads, as every use of the URL does: RFC 3986 allows any digits as a port,
 * 65536 included, which that parser refuses, and such a URL was refused later with a 422 where
 * a malformed field is a 400.
 */
function urisUrlParses(ajv: Ajv): void {
  const rfc3986 = ajv.formats.uri;
  if (typeof rfc3986 !== 'function') throw new Error('ajv-formats no longer gives uri a function: see urisUrlParses');
  ajv.addFormat('uri', { type: 'string', validate: (value: string) => rfc3986(value) && URL.canParse(value) });
}

/**
 * `format: "date-time"` as ajv-formats checks it (RFC 3339), and also one that `Date.parse` reads:
 * the routes make a time of it with `Date.parse`, which cannot read two forms RFC 3339 allows,
 * a leap second (`23:59:60`) and an offset of hours alone (`+01`). Passed on, such a value
 * becomes NaN, which PostgreSQL refuses as a bigint: a 500 where a 400 names the field.
 */
function dateTimesDateParseReads(ajv: Ajv): void {
  const rfc3339 = ajv.formats['date-time'] as { validate?: unknown; compare?: (a: string, b: string) => number };
  if (typeof rfc3339?.validate !== 'function') {
    throw new Error('ajv-formats no longer gives date-time a function: see dateTimesDateParseReads');
  }
  const checked = rfc3339.validate as (value: string) => boolean;
  ajv.addFormat('date-time', {
    type: 'string',
    validate: (value: string) => checked(value) && Number.isFinite(Date.parse(value)),
    compare: rfc3339.compare,
  });
}
