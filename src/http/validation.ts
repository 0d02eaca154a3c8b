import type { FieldError } from '../errors.ts';
import type { SchemaNode } from './input.ts';

/** One error of the validator (ajv, run verbose so that each error carries its schema node). */
export interface ValidationIssue {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
  parentSchema?: SchemaNode;
  schema?: unknown;
}

/** `/recipients/3/mobileNo` → `recipients[3].mobileNo`, the field-path form of the error shape. */
export function fieldPath(pointer: string, extra?: string): string {
  const parts = pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (extra !== undefined) parts.push(extra);
  return parts.reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), '');
}

/**
 * Every object of a request schema closed to fields it does not name, so that an unknown
 * field (a misspelling, the spec's `webHookUrl` sent to the CRM's `webhookUrl`) is a 400
 * naming it rather than a value silently ignored. Returns a copy; the route's own schema
 * objects may be shared with other routes and responses.
 */
export function closeSchema(node: SchemaNode): SchemaNode {
  const closed: SchemaNode = { ...node };
  if (node.properties) {
    closed.properties = Object.fromEntries(
      Object.entries(node.properties).map(([key, value]) => [key, closeSchema(value)]),
    );
    if (node.additionalProperties === undefined && node.patternProperties === undefined)
      closed.additionalProperties = false;
  }
  if (node.items) closed.items = closeSchema(node.items);
  for (const union of ['anyOf', 'allOf', 'oneOf'] as const)
    if (node[union]) closed[union] = node[union].map(closeSchema);
  return closed;
}

/** The query string of a route that declares none: no parameter is known. */
export const NO_PARAMETERS: SchemaNode = { type: 'object', properties: {}, additionalProperties: false };

// Optimal string alignment distance (Levenshtein plus a swap of neighbours), case-insensitive.
function distance(a: string, b: string): number {
  a = a.toLowerCase();
  b = b.toLowerCase();
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** The known field an unknown one probably meant: same letters in another case, or one or two typos away. */
export function probablyMeant(unknown: string, known: string[]): string | undefined {
  if (unknown.length > 100) return undefined;
  const allowed = unknown.length < 5 ? 1 : 2;
  const ranked = known
    .map((name) => ({ name, d: distance(unknown, name) }))
    .filter(({ d }) => d <= allowed)
    .sort((x, y) => x.d - y.d);
  return ranked[0]?.name;
}

/** The field whose schema lists `name` among its `x-also-called` names. */
function alsoCalled(name: string, properties: Record<string, SchemaNode>): string | undefined {
  const names = (node: SchemaNode) => (node['x-also-called'] as string[] | undefined) ?? [];
  return Object.entries(properties).find(([, node]) => names(node).includes(name))?.[0];
}

const TYPE_WORDS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  integer: 'a whole number',
  boolean: 'true or false',
  object: 'a JSON object',
  array: 'an array',
  null: 'null',
};

const FORMAT_WORDS: Record<string, string> = {
  uuid: 'must be a UUID (32 hexadecimal digits in groups of 8-4-4-4-12)',
  uri: 'must be an absolute URL',
  'date-time': 'must be a date and time in ISO 8601, like 2026-11-23T14:00:00Z',
};

const plural = (n: unknown, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

function sentence(issue: ValidationIssue): string {
  const p = issue.params;
  switch (issue.keyword) {
    case 'type':
      return `must be ${String(p.type)
        .split(',')
        .map((t) => TYPE_WORDS[t] ?? t)
        .join(' or ')}`;
    case 'minLength':
      return p.limit === 1 ? 'must not be empty' : `must be at least ${plural(p.limit, 'character')}`;
    case 'maxLength':
      return `must be at most ${plural(p.limit, 'character')}`;
    case 'minimum':
      return `must be at least ${p.limit}`;
    case 'maximum':
      return `must be at most ${p.limit}`;
    case 'minItems':
      return p.limit === 1 ? 'must not be empty' : `must hold at least ${plural(p.limit, 'item')}`;
    case 'maxItems':
      return `must hold at most ${plural(p.limit, 'item')}`;
    case 'minProperties':
      return 'must not be empty';
    case 'enum':
      return `must be one of ${(p.allowedValues as unknown[]).join(', ')}`;
    case 'const':
      return `must be ${String(p.allowedValue)}`;
    case 'format':
      return FORMAT_WORDS[String(p.format)] ?? `must be in the ${String(p.format)} format`;
    default:
      // A pattern without an errorMessage would land here: the regular expression is never shown.
      return 'is not in the expected form';
  }
}

const constants = (branches: unknown): unknown[] | undefined => {
  if (!Array.isArray(branches)) return undefined;
  const values = branches.map((b: SchemaNode) => (Object.hasOwn(b, 'const') ? b.const : undefined));
  return values.every((v) => v !== undefined) ? values : undefined;
};

/**
 * The validator's errors as the contract's field errors, in words a person can act on:
 * the schema's `errorMessage` when it has one, never a regular expression; an unknown field
 * with the known field it probably meant; one line for a union, not one per branch.
 */
export function describeIssues(issues: ValidationIssue[]): FieldError[] {
  const unions = new Set(
    issues.filter((i) => i.keyword === 'anyOf' || i.keyword === 'oneOf').map((i) => i.instancePath),
  );
  const errors: FieldError[] = [];
  for (const issue of issues) {
    const field = fieldPath(issue.instancePath);
    if (issue.keyword === 'required') {
      errors.push({
        field: fieldPath(issue.instancePath, String(issue.params.missingProperty)),
        message: 'is required',
      });
    } else if (issue.keyword === 'additionalProperties') {
      const name = String(issue.params.additionalProperty);
      const known = issue.parentSchema?.properties ?? {};
      const meant = alsoCalled(name, known) ?? probablyMeant(name, Object.keys(known));
      errors.push({
        field: fieldPath(issue.instancePath, name),
        message: meant ? `is not a known field; did you mean ${meant}?` : 'is not a known field',
      });
    } else if (typeof issue.parentSchema?.errorMessage === 'string') {
      errors.push({ field: field || '(body)', message: issue.parentSchema.errorMessage });
    } else if (unions.has(issue.instancePath)) {
      if (issue.keyword !== 'anyOf' && issue.keyword !== 'oneOf') continue;
      const allowed = constants(issue.schema);
      errors.push({
        field: field || '(body)',
        message: allowed ? `must be one of ${allowed.join(', ')}` : 'does not have any of the accepted forms',
      });
    } else {
      errors.push({ field: field || '(body)', message: sentence(issue) });
    }
  }
  // A node with an errorMessage fails once per keyword (a wrong type and a wrong length): say it once.
  return errors.filter((e, i) => errors.findIndex((o) => o.field === e.field && o.message === e.message) === i);
}
