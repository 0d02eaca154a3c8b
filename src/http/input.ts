import type { FieldError } from '../errors.ts';

/** A request schema node, as TypeBox writes it (plain JSON Schema). */
export interface SchemaNode {
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  anyOf?: SchemaNode[];
  allOf?: SchemaNode[];
  oneOf?: SchemaNode[];
  [keyword: string]: unknown;
}

/**
 * Annotations of request schemas, registered with the validator as keywords that check
 * nothing themselves:
 * - `errorMessage`: what a person is told when the value fails any of its node's keywords,
 *   instead of the validator's wording ("must match pattern …");
 * - `x-multiline`: a text field that may hold tabs and line breaks (a property value, an
 *   SMS text); every other string refuses every control character;
 * - `x-webhook-url`: a URL the service will post to, vetted when the request names it;
 * - `x-also-called`: names a client may send for the field, which an unknown field's error
 *   points to it from (`name` for the spec's `propertyname`), as a near misspelling does.
 */
export const ANNOTATIONS = ['errorMessage', 'x-multiline', 'x-webhook-url', 'x-also-called'] as const;

/** Deeper than any request of the contract (a contact's property fields are four levels). */
export const MAX_DEPTH = 32;

// C0 controls and DEL. NUL is why this exists: PostgreSQL's text cannot hold it, SQLite's
// can, so without this check the same request is a 500 on one database and data on the
// other (issue 10). The others have no meaning in a name, an address or an id.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is its purpose
const CONTROL = /[\u0000-\u001f\u007f]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is its purpose
const CONTROL_IN_TEXT = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;

// Keys that name a prototype's machinery; JSON.parse keeps them as plain own properties,
// but code that copies a body with Object.assign or a loop would set a prototype instead.
const PROTOTYPE_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

const codePoint = (char: string) => `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

function stringProblem(value: string, multiline: boolean): string | undefined {
  const control = (multiline ? CONTROL_IN_TEXT : CONTROL).exec(value);
  if (control) {
    if (control[0] === '\u0000') return 'must not contain NUL (U+0000)';
    const allowed = multiline
      ? 'only tab, line feed and carriage return are allowed here'
      : 'this field is one line of text';
    return `must not contain the control character ${codePoint(control[0])}; ${allowed}`;
  }
  if (!value.isWellFormed()) return 'must be well-formed Unicode: it holds half of a surrogate pair';
  return undefined;
}

const child = (path: string, key: string | number) =>
  typeof key === 'number' ? `${path}[${key}]` : path ? `${path}.${key}` : key;

/** The schema nodes a value under `key` may be checked against: a union's branches all count. */
function childSchemas(schemas: SchemaNode[], key: string | number): SchemaNode[] {
  const found: SchemaNode[] = [];
  const visit = (node: SchemaNode) => {
    for (const branch of [...(node.anyOf ?? []), ...(node.allOf ?? []), ...(node.oneOf ?? [])]) visit(branch);
    const next =
      typeof key === 'number'
        ? node.items
        : Object.hasOwn(node.properties ?? {}, key)
          ? node.properties![key]
          : undefined;
    if (next) found.push(next);
  };
  schemas.forEach(visit);
  return found;
}

const annotated = (schemas: SchemaNode[], keyword: string): boolean =>
  schemas.some(
    (node) =>
      node[keyword] === true ||
      annotated([...(node.anyOf ?? []), ...(node.allOf ?? []), ...(node.oneOf ?? [])], keyword),
  );

/**
 * Every string of a request part (body, query string or path parameters), with its field
 * path and the schema nodes that describe it (none for a field the schema does not know).
 * Stops descending at MAX_DEPTH.
 */
function* strings(
  value: unknown,
  schemas: SchemaNode[],
  path: string,
  depth = 0,
): Generator<
  | { field: string; value: string; schemas: SchemaNode[] }
  | { field: string; tooDeep: true }
  | { field: string; key: string }
> {
  if (typeof value === 'string') {
    yield { field: path, value, schemas };
    return;
  }
  if (value === null || typeof value !== 'object') return;
  if (depth >= MAX_DEPTH) {
    yield { field: path, tooDeep: true };
    return;
  }
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) yield* strings(item, childSchemas(schemas, i), child(path, i), depth + 1);
    return;
  }
  for (const [key, item] of Object.entries(value)) {
    yield { field: child(path, key), key };
    yield* strings(item, childSchemas(schemas, key), child(path, key), depth + 1);
  }
}

/**
 * Whether nothing in the value could be refused, whatever its schema: no control character (not
 * even a tab or a line break, which only the schema can allow), every string well-formed, no
 * prototype key, no nesting as deep as MAX_DEPTH. Almost every request is so, and this walk
 * builds no field paths and reads no schema: it took a fifth of the API's main thread under
 * bulk contact batches. Anything it cannot clear is walked again in full, with paths and schemas.
 */
function plainly(value: unknown, depth: number): boolean {
  if (typeof value === 'string') return !CONTROL.test(value) && value.isWellFormed();
  if (value === null || typeof value !== 'object') return true;
  if (depth >= MAX_DEPTH) return false;
  if (Array.isArray(value)) return value.every((item) => plainly(item, depth + 1));
  for (const key in value) {
    if (PROTOTYPE_KEYS.has(key) || !plainly(key, depth) || !plainly((value as Record<string, unknown>)[key], depth + 1))
      return false;
  }
  return true;
}

/**
 * What the boundary refuses in any request, whatever the route: control characters (tab
 * and line breaks only where the schema marks the field `x-multiline`), strings that are
 * not well-formed Unicode, prototype keys, and nesting deeper than MAX_DEPTH.
 */
export function inputProblems(value: unknown, schema: SchemaNode | undefined, path = ''): FieldError[] {
  const errors: FieldError[] = [];
  if (plainly(value, 0)) return errors;
  for (const item of strings(value, schema ? [schema] : [], path)) {
    if ('tooDeep' in item) {
      errors.push({ field: item.field || '(body)', message: `nests deeper than ${MAX_DEPTH} levels` });
    } else if ('key' in item) {
      if (PROTOTYPE_KEYS.has(item.key)) {
        errors.push({
          field: item.field,
          message: `is refused: ${item.key} is a name JavaScript gives to an object's prototype, and no field has it`,
        });
      } else {
        const problem = stringProblem(item.key, false);
        if (problem) errors.push({ field: item.field, message: `is not a field name: a name ${problem}` });
      }
    } else {
      const problem = stringProblem(item.value, annotated(item.schemas, 'x-multiline'));
      if (problem) errors.push({ field: item.field || '(body)', message: problem });
    }
  }
  return errors;
}

const annotatedBelow = new Map<string, WeakMap<SchemaNode, boolean>>();

/** Whether any node of the schema carries the annotation; remembered, as schemas never change. */
export function hasAnnotation(schema: SchemaNode | undefined, keyword: (typeof ANNOTATIONS)[number]): boolean {
  if (!schema) return false;
  let known = annotatedBelow.get(keyword);
  if (!known) {
    known = new WeakMap();
    annotatedBelow.set(keyword, known);
  }
  const remembered = known.get(schema);
  if (remembered !== undefined) return remembered;
  const children = [
    ...Object.values(schema.properties ?? {}),
    ...(schema.items ? [schema.items] : []),
    ...(schema.anyOf ?? []),
    ...(schema.allOf ?? []),
    ...(schema.oneOf ?? []),
  ];
  const found = schema[keyword] === true || children.some((node) => hasAnnotation(node, keyword));
  known.set(schema, found);
  return found;
}

/** Puts another string where an annotated one was found. */
type Replace = (next: string) => void;

/**
 * The strings of a request part whose schema carries the annotation, with their field paths and
 * a way to replace each where it is. It descends only where the schema has the annotation
 * somewhere below: the one webhook URL of a contact batch is found without visiting its
 * thousand contacts, which, walked in full, took a tenth of the API's main thread.
 */
export function annotatedStrings(
  value: unknown,
  schema: SchemaNode | undefined,
  keyword: (typeof ANNOTATIONS)[number],
): Array<{ field: string; value: string; replace: Replace }> {
  const found: Array<{ field: string; value: string; replace: Replace }> = [];
  const below = (schemas: SchemaNode[], key: string | number) =>
    childSchemas(schemas, key).filter((node) => hasAnnotation(node, keyword));
  const walk = (value: unknown, schemas: SchemaNode[], path: string, depth: number, replace: Replace): void => {
    if (typeof value === 'string') {
      if (annotated(schemas, keyword)) found.push({ field: path, value, replace });
      return;
    }
    if (value === null || typeof value !== 'object' || depth >= MAX_DEPTH) return;
    if (Array.isArray(value)) {
      const items = below(schemas, 0); // every item has the one items schema
      if (items.length > 0)
        for (const [i, item] of value.entries())
          walk(item, items, child(path, i), depth + 1, (next) => (value[i] = next));
      return;
    }
    const fields = value as Record<string, unknown>;
    for (const [key, item] of Object.entries(fields)) {
      const next = below(schemas, key);
      if (next.length > 0) walk(item, next, child(path, key), depth + 1, (put) => (fields[key] = put));
    }
  };
  const bare = () => {
    throw new Error('a body that is itself an annotated string has nowhere to be replaced');
  };
  if (schema && hasAnnotation(schema, keyword)) walk(value, [schema], '', 0, bare);
  return found;
}
