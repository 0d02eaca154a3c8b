import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { createWorker } from '../../src/server/worker.ts';
import { MAX_SCHEDULE_AHEAD_MS } from '../../src/messaging/schedule.ts';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, startTestApp, type TestApp } from '../support/app.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';

/**
 * Every route of the OpenAPI document (so a new route is fuzzed without a line here), with
 * hundreds of mutated bodies, query strings and path parameters each: no answer may be a
 * 5xx, every 4xx has the contract's error shape in words (no regular expression), and once
 * the queue is drained no job that accepted input queued may be failing. Seeded, so a
 * failure is reproducible: FUZZ_SEED=<seed> to replay, FUZZ_CASES=<n> for more cases.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261123);
const CASES = Number(process.env.FUZZ_CASES ?? 200);

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  enum?: Json[];
  const?: Json;
  format?: string;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  [keyword: string]: unknown;
}

function random(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)],
    chance: (p: number) => next() < p,
  };
}
type Random = ReturnType<typeof random>;

const deep = (levels: number): Json => (levels === 0 ? 1 : [deep(levels - 1)]);

// The values a hostile client sends in place of a good one.
const NASTY: Json[] = [
  '\u0000',
  'a\u0000b',
  'nul\u0000@example.com',
  '\u0007',
  '\u001b[31m',
  '\t',
  'a\nb',
  '\r\n',
  '\u007f',
  '\ud800',
  '\udfff\ud800',
  '',
  ' ',
  'x'.repeat(5000),
  '😀'.repeat(300),
  "'; drop table contacts; --",
  '%00',
  '../../etc/passwd',
  '__proto__',
  'http://127.0.0.1/',
  'javascript:alert(1)',
  'ünïcödé@exämple.com',
  '1e400',
  '-1',
  '0',
  '00',
  '9'.repeat(30),
  0,
  -1,
  1.5,
  1e308,
  -1e308,
  2 ** 53 + 1,
  Number.MAX_SAFE_INTEGER,
  true,
  false,
  null,
  [],
  {},
  [[]],
  { a: 1 },
  ['x'],
  deep(40),
  deep(500),
];
// A copy: mutations must not change the shared list.
const nasty = (r: Random): Json => structuredClone(r.pick(NASTY));
const UNKNOWN_KEYS = ['__proto__', 'constructor', 'prototype', 'x', 'a\u0000', '', 'webHookUrl', 'extra'];
const RAW_BODIES: Array<string | Buffer> = [
  '',
  '   ',
  'null',
  '[]',
  '5',
  '"text"',
  '{',
  '{"a":',
  '{"a":1}}',
  '{"a":1,"a":2}',
  '\u0000',
  '{"__proto__":{"polluted":1}}',
  Buffer.from([0xff, 0xfe, 0xfd]),
  Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]),
  `${'['.repeat(100_000)}${']'.repeat(100_000)}`,
  `{"name":"${'a'.repeat(2_000_000)}"}`,
];
const CURSOR_TEXTS = [
  'a\u0000@example.com',
  '1.a\u0000@example.com',
  'a@example.com',
  '1',
  '9'.repeat(16),
  '9'.repeat(18),
  '1.2.3',
  '00000000-0000-0000-0000-000000000000',
  '1.00000000-0000-0000-0000-000000000000',
];
const RAW_SEGMENTS = [
  '%00',
  '%ff',
  '%c3%28',
  '%2e%2e',
  '..',
  'x'.repeat(3000),
  '%E2%80%AE',
  '1e3',
  '-1',
  '00000000-0000-0000-0000-000000000000',
  '%20',
];

interface Pools {
  uuids: string[];
  accountId: string;
  listId: string;
  propertyId: string;
  landingPageId: string;
  shortenerUrl: string;
  webhookUrl: string;
  property: string;
}

let sequence = 0;
function stringFor(key: string, schema: Schema, r: Random, pools: Pools): string {
  if (schema['x-webhook-url']) return pools.webhookUrl;
  if (key === 'accountId') return pools.accountId;
  if (key === 'listId') return r.chance(0.9) ? pools.listId : randomUUID();
  if (key === 'propertyid') return r.chance(0.9) ? pools.propertyId : randomUUID();
  if (key === 'landingPageId') return r.chance(0.9) ? pools.landingPageId : randomUUID();
  if (key === 'shortnerUrl') return r.chance(0.8) ? pools.shortenerUrl : `https://d${++sequence}.example.com`;
  if (key === 'url') return r.pick(['https://example.com/offer', 'http://example.com/a b?c=d']);
  if (schema.format === 'uuid') return r.chance(0.8) && pools.uuids.length > 0 ? r.pick(pools.uuids) : randomUUID();
  if (schema.format === 'uri') return pools.webhookUrl;
  // RFC 3339 allows a leap second and an offset of hours alone, which Date.parse cannot read.
  if (schema.format === 'date-time')
    return r.pick([new Date(Date.now() + 86_400_000).toISOString(), '2030-12-31T23:59:60Z', '2030-01-01T00:00:00+01']);
  // A cursor decodes to parts a query reads: each kind of part, with a NUL or out of range.
  if (key === 'cursor') return Buffer.from(r.pick(CURSOR_TEXTS)).toString('base64url');
  if (schema.pattern) {
    const candidates = ['1', '5', '50', '100', '1000', '919812345678', '447911123456'];
    return candidates.find((c) => new RegExp(schema.pattern!).test(c)) ?? '1';
  }
  // Email: the service's own sender domain, so some batches are accepted; a Base64 body.
  if (key === 'emailBody') return Buffer.from('<p>fuzz [note] text</p>').toString('base64');
  if (key === 'html') return '<p>fuzz [note] text</p>';
  if (/email|userName|^to$/i.test(key)) return `fuzz${++sequence}@mail.localhost`;
  if (/password/i.test(key)) return 'correct horse battery staple';
  if (key === 'propertyname') return r.chance(0.9) ? pools.property : `prop${++sequence}`;
  if (key === 'timeZoneOffset') return r.pick(['+05:30', 'UTC', 'Europe/Paris']);
  if (key === 'locale') return r.pick(['en', 'fr-FR']);
  if (key === 'domain') return `d${++sequence}.example.com`;
  // SMS: the service's default sender, a valid mobile, a tag in the text and its value.
  if (key === 'senderName') return 'HERALD';
  if (key === 'tagName') return '[note]';
  if (key === 'body') return 'fuzz [note] text';
  if (key === 'scheduleDateTime') return new Date(Date.now() + 60_000).toISOString();
  return `fuzz ${++sequence}`;
}

/** A value the schema accepts, as far as the schema says (service rules may still refuse it). */
function valid(schema: Schema | undefined, key: string, r: Random, pools: Pools): Json {
  if (!schema) return null;
  if (schema.anyOf) return valid(r.pick(schema.anyOf), key, r, pools);
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return r.pick(schema.enum);
  // SMS numbers: a string of digits or a JSON number, a schema with no type; the string one
  // never the number the suppression routes are fuzzed with, so some of the sends reach it.
  if (key === 'recipient' || key === 'mobileNo') return r.chance(0.5) ? '447911123456' : 919812345678;
  switch (schema.type) {
    case 'object': {
      const out: Record<string, Json> = {};
      const names = Object.keys(schema.properties ?? {});
      // The service's rules between fields: a mobile is both parts; a property field is by id or by name.
      const withMobile = r.chance(0.6);
      const byId = r.chance(0.5);
      for (const [name, property] of Object.entries(schema.properties ?? {})) {
        let wanted = schema.required?.includes(name) || r.chance(0.6);
        if (name === 'mobileCountryCode' || name === 'mobileNumber') wanted = withMobile;
        if (
          names.includes('propertyid') &&
          names.includes('propertyname') &&
          (name === 'propertyid' || name === 'propertyname')
        )
          wanted = byId === (name === 'propertyid');
        if (wanted) out[name] = valid(property, name, r, pools);
      }
      return out;
    }
    case 'array':
      return Array.from({ length: Math.max(schema.minItems ?? 0, 1 + r.int(3)) }, () =>
        valid(schema.items, key, r, pools),
      );
    case 'integer':
    case 'number':
      return Math.max(schema.minimum ?? 1, Math.min(schema.maximum ?? 1000, 1 + r.int(1000)));
    case 'boolean':
      return r.chance(0.5);
    case 'string':
      return stringFor(key, schema, r, pools);
    default:
      // Fields the service checks itself (the CRM's digits and opt-ins).
      if (key === 'mobileCountryCode') return '91';
      if (key === 'mobileNumber') return `98${String(10_000_000 + r.int(89_999_999))}`;
      if (/OptIn$/.test(key)) return r.pick([true, false, null, '']);
      return null;
  }
}

/** Every container in the value, with a way to replace a child. */
function containers(value: Json): Array<Json[] | Record<string, Json>> {
  const found: Array<Json[] | Record<string, Json>> = [];
  const visit = (v: Json, depth: number) => {
    if (v === null || typeof v !== 'object' || depth > 8) return;
    found.push(v);
    for (const child of Array.isArray(v) ? v : Object.values(v)) visit(child, depth + 1);
  };
  visit(value, 0);
  return found;
}

function mutate(value: Json, r: Random): Json {
  if (value === null || typeof value !== 'object' || r.chance(0.08)) return nasty(r);
  for (let n = 1 + r.int(3); n > 0; n--) {
    const target = r.pick(containers(value));
    if (Array.isArray(target)) {
      if (target.length > 0 && r.chance(0.7)) target[r.int(target.length)] = nasty(r);
      else target.push(nasty(r));
      continue;
    }
    const keys = Object.keys(target);
    const roll = r.next();
    if (keys.length > 0 && roll < 0.6) target[r.pick(keys)] = nasty(r);
    else if (keys.length > 0 && roll < 0.75) delete target[r.pick(keys)];
    else if (keys.length > 0 && roll < 0.85) {
      const key = r.pick(keys);
      target[key.toUpperCase() === key ? key.toLowerCase() : key.toUpperCase()] = target[key];
      delete target[key];
    } else
      Object.defineProperty(target, r.pick(UNKNOWN_KEYS), {
        value: nasty(r),
        enumerable: true,
        configurable: true,
        writable: true,
      });
  }
  return value;
}

interface Route {
  method: string;
  path: string;
  body?: Schema;
  query: Array<{ name: string; schema: Schema }>;
  params: Array<{ name: string; schema: Schema }>;
  /** Behind ADMIN_TOKEN: the admin API, and the operator's routes elsewhere (tagged admin: POST /email/complaints). */
  admin: boolean;
  /** Query fields every case sends as given (`dryRun=true`), before the fuzzed ones. */
  fixed: string[];
}

/** `POST /sms/single`, or `POST /sms/single?dryRun=true` for a route's dry-run variant. */
const nameOf = (route: Route) =>
  `${route.method} ${route.path}${route.fixed.length > 0 ? `?${route.fixed.join('&')}` : ''}`;

/** What routesOf reads of an OpenAPI operation. */
interface Operation {
  parameters?: Array<{ in: string; name: string; schema: Schema }>;
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  tags?: string[];
}

function routesOf(document: { paths: Record<string, Record<string, Operation>> }): Route[] {
  const routes: Route[] = [];
  for (const [path, operations] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      const parameters = operation.parameters ?? [];
      routes.push({
        method: method.toUpperCase(),
        path,
        body: operation.requestBody?.content?.['application/json']?.schema,
        query: parameters.filter((p) => p.in === 'query'),
        params: parameters.filter((p) => p.in === 'path'),
        admin: path.startsWith('/admin') || (operation.tags ?? []).includes('admin'),
        fixed: [],
      });
    }
  }
  // A route that takes ?dryRun (ARCHITECTURE.md, "Preflight") again, every case a dry run: fuzzed
  // as one query field among others, a dry run got past the body's schema a few times in 300. Last,
  // so the routes before keep their seeds.
  const dryRuns = routes
    .filter((route) => route.query.some((q) => q.name === 'dryRun'))
    .map((route) => ({ ...route, query: route.query.filter((q) => q.name !== 'dryRun'), fixed: ['dryRun=true'] }));
  return [...routes, ...dryRuns];
}

// encodeURIComponent throws on half a surrogate pair: send the bytes it would have been (not UTF-8).
const encode = (text: string) => (text.isWellFormed() ? encodeURIComponent(text) : '%ED%A0%80');

/** One request: mostly a valid input with a few mutations, sometimes raw bytes or segments. */
function buildCase(route: Route, r: Random, pools: Pools): { url: string; payload?: string | Buffer } {
  let path = route.path;
  for (const param of route.params) {
    const good = String(valid(param.schema, param.name, r, pools));
    const segment = r.chance(0.15) ? r.pick(RAW_SEGMENTS) : encode(r.chance(0.15) ? String(nasty(r)) : good);
    path = path.replace(`{${param.name}}`, segment);
  }
  const query = [...route.fixed];
  for (const parameter of route.query) {
    if (!r.chance(0.5)) continue;
    const value = r.chance(0.2) ? String(nasty(r)) : String(valid(parameter.schema, parameter.name, r, pools));
    query.push(`${encode(parameter.name)}=${encode(value)}`);
  }
  if (r.chance(0.1))
    query.push(`${r.pick(['x', 'limt', 'LIMIT', '__proto__', 'cursor'])}=${r.pick(['1', '%00', '%ff', ''])}`);
  if (r.chance(0.05)) query.push(query[0] ?? 'limit=1');
  const url = query.length > 0 ? `${path}?${query.join('&')}` : path;

  if (route.method === 'GET' || route.method === 'DELETE') return r.chance(0.1) ? { url, payload: '{"x":1}' } : { url };
  if (r.chance(0.08)) return { url, payload: r.pick(RAW_BODIES) };
  const body = route.body ? valid(route.body, '', r, pools) : r.chance(0.5) ? {} : null;
  if (body === null) return { url };
  return { url, payload: JSON.stringify(r.chance(0.75) ? mutate(body, r) : body) };
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

forEachDatabase((dialect) => {
  let t: TestApp;
  let receiver: Receiver;
  let token: string;
  let pools: Pools;
  let routes: Route[];
  const accepted = new Set<string>();
  /** The dry-run variants that answered a dry run (200) at least once. */
  const dryRan = new Set<string>();

  before(async () => {
    receiver = await startReceiver();
    t = await startTestApp(dialect, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const account = await t.createAccount();
    const victim = await t.createAccount();
    token = await t.tokenFor(account);
    const admin = bearer(ADMIN_TOKEN);
    const limits = await t.app.inject({ method: 'GET', url: `/admin/accounts/${account.row.id}`, headers: admin });
    const rateLimits = Object.fromEntries(Object.keys(limits.json().rateLimits).map((group) => [group, 1_000_000]));
    await t.app.inject({
      method: 'PATCH',
      url: `/admin/accounts/${account.row.id}`,
      headers: admin,
      payload: { rateLimits },
    });
    const auth = bearer(token);
    const property = await t.app.inject({
      method: 'POST',
      url: '/contacts/properties',
      headers: auth,
      payload: { propertyname: 'note' },
    });
    const list = await t.app.inject({ method: 'POST', url: '/lists', headers: auth, payload: { name: 'fuzzed' } });
    const page = await t.app.inject({
      method: 'POST',
      url: '/landing-pages',
      headers: auth,
      payload: { name: 'fuzzed', url: 'https://example.com/' },
    });
    await t.app.inject({
      method: 'POST',
      url: `/admin/accounts/${account.row.id}/shortener-domains`,
      headers: admin,
      payload: { domain: 'go.fuzz.example' },
    });
    const [listId, propertyId, landingPageId] = [
      list.json().listId as string,
      property.json().propertyid as string,
      page.json().landingPageId as string,
    ];
    pools = {
      uuids: [listId],
      accountId: victim.row.id,
      listId,
      propertyId,
      landingPageId,
      shortenerUrl: 'https://go.fuzz.example',
      webhookUrl: receiver.url,
      property: 'note',
    };
    routes = routesOf(t.app.swagger() as never);
  });
  after(async () => {
    await t.close();
    await receiver.close();
  });

  it('fuzzes every route: no 5xx, the error shape on every 4xx, messages in words', async () => {
    assert.ok(routes.length >= 20, `only ${routes.length} routes in the OpenAPI document`);
    const problems: string[] = [];
    for (const [index, route] of routes.entries()) {
      const r = random(SEED + index);
      const headers = bearer(route.admin ? ADMIN_TOKEN : token);
      for (let n = 0; n < CASES; n++) {
        const { url, payload } = buildCase(route, r, pools);
        const response: LightMyRequestResponse = await t.app.inject({
          method: route.method as 'GET',
          url,
          headers: payload === undefined ? headers : { ...headers, 'content-type': 'application/json' },
          payload,
        });
        const where =
          `${route.method} ${url.slice(0, 120)} (seed ${SEED + index}, ` +
          `case ${n}) ${String(payload ?? '').slice(0, 200)}`;
        if (response.statusCode >= 500)
          problems.push(`${response.statusCode} for ${where}: ${response.body.slice(0, 300)}`);
        else if (response.statusCode >= 400) {
          const body = response.json();
          const shaped =
            body.status === 'Failure' &&
            typeof body.message === 'string' &&
            Array.isArray(body.errors) &&
            body.errors.every(
              (e: { field: unknown; message: unknown }) => typeof e.field === 'string' && typeof e.message === 'string',
            );
          if (!shaped) problems.push(`not the error shape for ${where}: ${response.body.slice(0, 300)}`);
          else if (/pattern|must match|\^|\$\)?"?$/.test(response.body))
            problems.push(`a regular expression in ${where}: ${response.body.slice(0, 300)}`);
        } else {
          for (const id of response.body.match(UUID) ?? [])
            if (pools.uuids.length < 500 && !pools.uuids.includes(id)) pools.uuids.push(id);
          if (route.fixed.includes('dryRun=true')) {
            if (response.statusCode === 202) problems.push(`a dry run queued a send: ${where}`);
            else if (response.statusCode === 200 && response.json().dryRun === true) dryRan.add(nameOf(route));
          } else if (response.statusCode === 202) accepted.add(nameOf(route));
        }
      }
    }
    assert.deepEqual(problems.slice(0, 10), [], `${problems.length} problems`);
    for (const route of ['POST /contacts/batch', 'POST /sms/single', 'POST /sms/batch', 'POST /email/batch']) {
      assert.ok(accepted.has(route), `${route} never answered 202: the fuzzer never reached its queue`);
    }
    for (const route of ['POST /sms/single', 'POST /sms/batch', 'POST /email/batch']) {
      const dryRun = `${route}?dryRun=true`;
      assert.ok(dryRan.has(dryRun), `${dryRun} never answered a dry run: the fuzzer never reached the preflight`);
    }
  });

  it('gives every pattern of every request schema a message in words', () => {
    const unworded: string[] = [];
    const visit = (node: unknown, where: string) => {
      if (node === null || typeof node !== 'object') return;
      const schema = node as Schema;
      if (schema.pattern !== undefined && typeof schema.errorMessage !== 'string') unworded.push(where);
      for (const [key, child] of Object.entries(schema)) visit(child, `${where}.${key}`);
    };
    for (const route of routes) {
      visit(route.body, `${route.method} ${route.path} body`);
      for (const parameter of [...route.query, ...route.params])
        visit(parameter.schema, `${route.method} ${route.path} ${parameter.name}`);
    }
    assert.deepEqual(unworded, []);
  });

  it('leaves no job failing from any input it accepted', async () => {
    const worker = createWorker(t.ctx);
    // The sends the fuzzer did not cancel are the scheduled ones: their time comes.
    t.clock.advance(MAX_SCHEDULE_AHEAD_MS);
    // Finished jobs are deleted: what ran is what drain() counts.
    assert.ok((await worker.drain()) > 0, 'no job ran');
    const failing = await t.ctx.db
      .selectFrom('jobs')
      .select(['id', 'kind', 'state', 'last_error'])
      .where((eb) => eb.or([eb('last_error', 'is not', null), eb('state', '=', 'dead')]))
      .execute();
    assert.deepEqual(failing, []);
    const links = await t.ctx.db
      .selectFrom('links')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    assert.ok(Number(links.n) > 0, 'no accepted SMS carried a landing page link');
  });
});
