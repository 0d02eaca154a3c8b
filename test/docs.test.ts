import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { it } from 'node:test';

/**
 * The README and the pages under docs/ name files, npm scripts and each other; this checks that
 * every one of those names still holds, so a file moved or a script renamed fails here rather
 * than misleading a reader.
 */

const ROOT = new URL('..', import.meta.url).pathname;

/** The pages checked: README.md and every docs/*.md, as paths from the repository's root. */
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

interface Repo {
  exists(path: string): boolean;
  read(path: string): string;
  scripts: ReadonlySet<string>;
}

const packageJson = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: object };
const repo: Repo = {
  exists: (path) => existsSync(join(ROOT, path)),
  read: (path) => readFileSync(join(ROOT, path), 'utf8'),
  scripts: new Set(Object.keys(packageJson.scripts)),
};

/**
 * A repository path in prose or code: one of these folders, then path characters. Not inside a
 * longer path (`web/src/api.ts` is not `src/api.ts`); `./bin/herald` is `bin/herald`.
 */
const PATH = /(?<![\w./-])(?:\.\/)?((?:src|test|bench|docs|bin)\/[\w./-]*)/g;
/** A placeholder or a pattern after a path's start (`src/<domain>/`, `test/**`) makes it a kind of path, not one. */
const PATTERN_AFTER = /^[<*{…]/;
const SCRIPT = /npm run ([\w:.-]+)/g;
const FENCE = /^```[^\n]*\n[\s\S]*?^```$/gm;
const LINK = /!?\[[^\]\n]*\]\(([^)\s]+)\)/g;

/** The paths a page names, each once. */
function namedPaths(text: string): string[] {
  const paths = new Set<string>();
  for (const match of text.matchAll(PATH)) {
    if (PATTERN_AFTER.test(text.slice(match.index + match[0].length))) continue;
    const path = match[1].replace(/[./]+$/, '');
    if (path.includes('/')) paths.add(path);
  }
  return [...paths];
}

/** The npm scripts a page runs with `npm run`, each once. */
function namedScripts(text: string): string[] {
  const scripts = new Set<string>();
  for (const match of text.matchAll(SCRIPT)) {
    if (PATTERN_AFTER.test(text.slice(match.index + match[0].length))) continue;
    scripts.add(match[1].replace(/[.:]+$/, ''));
  }
  return [...scripts];
}

/** A page's text without its code: what is a link there is prose. */
function prose(text: string): string {
  return text.replace(FENCE, '').replace(/`[^`\n]*`/g, '');
}

/**
 * GitHub's anchor for each heading of a page: lower-cased, punctuation dropped, spaces as
 * hyphens, a repeated one numbered (`-1`, `-2`).
 */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const [, heading] of text.replace(FENCE, '').matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const words = heading.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = words
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    found.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return found;
}

/** What a page (`page`, its path from the root, holding `text`) names that does not exist, in words. */
function brokenReferences(page: string, text: string, files: Repo): string[] {
  const problems: string[] = [];
  for (const path of namedPaths(text)) {
    if (!files.exists(path)) problems.push(`${page} names ${path}, which does not exist`);
  }
  for (const script of namedScripts(text)) {
    if (!files.scripts.has(script)) problems.push(`${page} runs npm run ${script}, which package.json does not define`);
  }
  for (const [, target] of prose(text).matchAll(LINK)) {
    if (/^[a-z]+:/i.test(target)) continue;
    const [file, anchor] = target.split('#', 2);
    const path = file === '' ? page : relative(ROOT, join(ROOT, dirname(page), file));
    if (!files.exists(path)) {
      problems.push(`${page} links to ${target}, and ${path} does not exist`);
      continue;
    }
    if (anchor !== undefined && path.endsWith('.md') && !anchors(path === page ? text : files.read(path)).has(anchor)) {
      problems.push(`${page} links to ${target}, and ${path} has no heading #${anchor}`);
    }
  }
  return problems;
}

it('the README and docs/ name only files, scripts and headings that exist', () => {
  assert.ok(PAGES.length > 1, 'docs/ holds pages');
  assert.deepEqual(
    PAGES.flatMap((page) => brokenReferences(page, repo.read(page), repo)),
    [],
  );
});

it('finds a named file, a script, a linked page and a heading that are not there', () => {
  const text = [
    'The worker is `src/queue/worker.ts`, its kinds in `src/server/worker.ts`; see `src/<domain>/` and ' +
      '`test/**/*.test.ts`.',
    'Pages: `src/sms/send-pages.ts`, run `./bin/herald`, then `npm run bench:sms` and `npm run bench:<name>`.',
    'Also `npm run bench:nothing`, [the queue](docs/concepts.md#the-queue), [gone](docs/gone.md),',
    '[no such heading](docs/concepts.md#no-such-heading), [here](#a-heading) and `[not a link](docs/gone.md)`.',
    '',
    '## A heading',
  ].join('\n');
  assert.deepEqual(brokenReferences('README.md', text, repo), [
    'README.md names src/sms/send-pages.ts, which does not exist',
    'README.md names docs/gone.md, which does not exist',
    'README.md runs npm run bench:nothing, which package.json does not define',
    'README.md links to docs/gone.md, and docs/gone.md does not exist',
    'README.md links to docs/concepts.md#no-such-heading, and docs/concepts.md has no heading #no-such-heading',
  ]);
});

it('reads headings as GitHub anchors them', () => {
  const text = [
    '# Herald',
    '## `ENCRYPTION_KEY`',
    '### Replacing `ENCRYPTION_KEY`',
    '## Inbound mail: bounces, complaints',
    '## Sends, usage',
    '## Sends, usage',
    '```sh',
    '# a comment',
    '```',
  ].join('\n');
  assert.deepEqual(
    [...anchors(text)],
    [
      'herald',
      'encryption_key',
      'replacing-encryption_key',
      'inbound-mail-bounces-complaints',
      'sends-usage',
      'sends-usage-1',
    ],
  );
});
