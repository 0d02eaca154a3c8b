import assert from 'node:assert/strict';
import { it } from 'node:test';
import { Gathering } from '../../src/db/gathering.ts';

/** The group sizes a Gathering makes of callers that each arrive in a callback of their own, in one turn. */
async function groupsOfOneTurn(waitForTurn: boolean): Promise<number[]> {
  const sizes: number[] = [];
  // A read that runs to its end at once, as SQLite's on the main thread.
  const gathering = new Gathering<number, number>(
    async (group) => {
      sizes.push(group.length);
      return group.map((n) => n * 10);
    },
    { maxSize: 10, waitForTurn },
  );
  const answers = await Promise.all(
    [1, 2, 3].map((n) => new Promise<number>((resolve) => setImmediate(() => resolve(gathering.run(n))))),
  );
  assert.deepEqual(answers, [10, 20, 30], 'each caller its own answer');
  return sizes;
}

it('makes one group of the callers of one turn when it waits for the turn, and one each when it does not', async () => {
  assert.deepEqual(await groupsOfOneTurn(true), [3]);
  assert.deepEqual(await groupsOfOneTurn(false), [1, 1, 1]);
});
