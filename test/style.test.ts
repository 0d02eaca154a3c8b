import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';

/**
 * Biome formats to 120 columns but leaves strings and comments as they are; this holds them to
 * the same width, so a reader never scrolls sideways.
 */

const ROOT = new URL('..', import.meta.url).pathname;
const WIDTH = 120;
const SOURCES = /^(src|test|bench|web)\/.*\.(ts|tsx|css)$/;

it(`keeps every line of the sources within ${WIDTH} characters`, () => {
  const tracked = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' }).split('\n');
  const long: string[] = [];
  for (const path of tracked.filter((file) => SOURCES.test(file))) {
    readFileSync(join(ROOT, path), 'utf8')
      .split('\n')
      .forEach((line, index) => {
        if ([...line].length > WIDTH) long.push(`${path}:${index + 1} (${[...line].length})`);
      });
  }
  assert.deepEqual(long, []);
});
