import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { modulesLoadedWith } from './db/support/import-graph.ts';

/**
 * Dependencies run one way: each module of src/ belongs to a layer, and imports from its own
 * layer or those below, never from one above. Modules of one layer may import each other, but
 * no two folders may import each other, even by way of others (a cycle). Every import counts:
 * `import type` too, and the modules a thread or a dynamic import() loads.
 */

const SRC = fileURLToPath(new URL('../src/', import.meta.url));

/**
 * The layers, lowest first. A module's place is its path's longest entry here: a file, or a
 * folder (ending in /), so sms/transports/ sits above sms/.
 */
const LAYERS: ReadonlyArray<{ name: string; modules: readonly string[] }> = [
  {
    name: 'shared leaves',
    modules: ['errors.ts', 'clock.ts', 'log.ts', 'threads.ts', 'sealed.ts', 'transport-url.ts', 'url-password.ts'],
  },
  {
    name: 'storage, rate limits and configuration',
    // config.ts reads every setting at start, the transports' URLs too: their parsers live
    // beside their transports, and sit here with config.ts, importing no more than it may.
    modules: [
      'db/',
      'ratelimit/',
      'config.ts',
      'sealed-keys.ts',
      'sms/transports/smpp/url.ts',
      'email/transports/smtp-url.ts',
    ],
  },
  { name: 'the context and HTTP plumbing', modules: ['context.ts', 'http/'] },
  // Written by the domains, in the transactions of their changes.
  { name: 'the audit log', modules: ['audit/'] },
  { name: 'the queue', modules: ['queue/'] },
  {
    name: 'domains',
    modules: ['webhooks/', 'crm/', 'auth/', 'accounts/', 'senders/', 'links/', 'messaging/', 'console/'],
  },
  { name: 'channels', modules: ['sms/', 'email/'] },
  { name: 'products over the channels', modules: ['verify/', 'privacy/'] },
  { name: 'transports and simulators', modules: ['sms/transports/', 'email/transports/', 'sim/'] },
  { name: 'entry points', modules: ['server/', 'cli/'] },
];

/** Imports that ran the wrong way once, each named with where what it wanted lives now. */
const REFUSED: ReadonlyArray<{ from: string; to: string; why: string }> = [
  { from: 'accounts/', to: 'email/', why: "a sender domain's DKIM key is made in senders/, with its keys" },
  { from: 'sms/validate.ts', to: 'accounts/', why: 'the sender-name rule lives in senders/' },
  { from: 'sms/transports/', to: 'sms/inbound.ts', why: 'the inbound handler is given to the transport as it is made' },
];

interface Import {
  from: string;
  to: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) ? [path] : [];
  });
}

/** import/export … from, bare imports, import() and the `new URL('./x.ts', import.meta.url)` threads start from. */
const SPECIFIER = new RegExp(
  [
    String.raw`^\s*(?:import|export)\b[^;]*?\bfrom\s*'([^']+)'`,
    String.raw`^\s*import\s*'([^']+)'`,
    String.raw`\bimport\(\s*'([^']+)'\s*\)`,
    String.raw`\bnew URL\(\s*'([^']+\.tsx?)'`,
  ].join('|'),
  'gms',
);

/** Every import of one module of src/ by another, as paths relative to src/. */
function importsOf(files: readonly string[]): Import[] {
  return files.flatMap((file) =>
    [...readFileSync(file, 'utf8').matchAll(SPECIFIER)].flatMap((match) => {
      const specifier = match[1] ?? match[2] ?? match[3] ?? match[4];
      if (!specifier.startsWith('.')) return [];
      const to = relative(SRC, resolve(dirname(file), specifier));
      return to.startsWith('..') ? [] : [{ from: relative(SRC, file), to }];
    }),
  );
}

const under = (path: string, entry: string) => (entry.endsWith('/') ? path.startsWith(entry) : path === entry);

/** The module's entry in LAYERS (its unit) and that entry's layer, by the longest entry it falls under. */
function placeOf(path: string): { unit: string; layer: number } | undefined {
  let best: { unit: string; layer: number } | undefined;
  LAYERS.forEach(({ modules }, layer) => {
    for (const unit of modules) {
      if (under(path, unit) && (!best || unit.length > best.unit.length)) best = { unit, layer };
    }
  });
  return best;
}

const files = sourceFiles(SRC);
const imports = importsOf(files);
const describe = ({ from, to }: Import) => `src/${from} imports src/${to}`;

it('gives every module of src/ a layer', () => {
  assert.deepEqual(
    files.map((file) => relative(SRC, file)).filter((path) => !placeOf(path)),
    [],
  );
});

it('runs every import down the layers: none reaches a layer above its own', () => {
  const upward = imports.flatMap((edge) => {
    const [from, to] = [placeOf(edge.from)!, placeOf(edge.to)!];
    if (to.layer <= from.layer) return [];
    return [`${describe(edge)}: ${LAYERS[to.layer].name} sit above ${LAYERS[from.layer].name}`];
  });
  assert.deepEqual(upward, []);
});

it('has no cycle between folders: no two import each other, even by way of others', () => {
  const next = new Map<string, Set<string>>();
  for (const edge of imports) {
    const [from, to] = [placeOf(edge.from)!.unit, placeOf(edge.to)!.unit];
    if (from !== to) next.set(from, (next.get(from) ?? new Set()).add(to));
  }
  assert.deepEqual(cyclesOf(next), []);
});

it('refuses the imports that ran the wrong way: accounts→email, sms/validate→accounts, SMPP→sms/inbound', () => {
  const found = imports.flatMap((edge) =>
    REFUSED.filter(({ from, to }) => under(edge.from, from) && under(edge.to, to)).map(
      ({ why }) => `${describe(edge)}: ${why}`,
    ),
  );
  assert.deepEqual(found, []);
});

it('loads nothing of src/ but src/db/ and the shared leaves when a database opens: storage stays below', async () => {
  const loaded = await modulesLoadedWith([new URL('../src/db/database.ts', import.meta.url).href]);
  const source = new URL('../src/', import.meta.url).href;
  const above = loaded
    .filter((url) => url.startsWith(source))
    .map((url) => fileURLToPath(url))
    .map((path) => relative(SRC, path))
    .filter((path) => !under(path, 'db/') && placeOf(path)!.layer > 0);
  assert.deepEqual(above, []);
});

/** The groups of two units or more that reach each other (Tarjan's strongly connected components), each sorted. */
function cyclesOf(next: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const visit = (unit: string) => {
    index.set(unit, index.size);
    low.set(unit, index.get(unit)!);
    stack.push(unit);
    for (const to of next.get(unit) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(unit, Math.min(low.get(unit)!, low.get(to)!));
      } else if (stack.includes(to)) {
        low.set(unit, Math.min(low.get(unit)!, index.get(to)!));
      }
    }
    if (low.get(unit) !== index.get(unit)) return;
    const group: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      group.push(member);
    } while (member !== unit);
    if (group.length > 1) cycles.push(group.sort());
  };
  for (const unit of next.keys()) if (!index.has(unit)) visit(unit);
  return cycles;
}
