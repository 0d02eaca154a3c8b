import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
import { startThread } from '../src/threads.ts';

// A thread that makes garbage, with a few thousand objects alive at a time, and answers the
// largest its young generation (new_space) grew to, in MiB.
const churn = new URL(
  `data:text/javascript,${encodeURIComponent(`
  import { parentPort } from 'node:worker_threads';
  import { getHeapSpaceStatistics } from 'node:v8';
  const young = () => getHeapSpaceStatistics().find((space) => space.space_name === 'new_space').physical_space_size;
  let alive = [];
  let largest = 0;
  for (let i = 0; i < 2_000_000; i++) {
    alive.push({ i, text: 'item ' + i });
    if (alive.length > 20_000) alive = [];
    if (i % 10_000 === 0) largest = Math.max(largest, young());
  }
  parentPort.postMessage(largest / 1048576);
`)}`,
);

async function youngPeak(worker: Worker): Promise<number> {
  const [mib] = await once(worker, 'message');
  await worker.terminate();
  return mib as number;
}

after(() => setFlagsFromString('--max-semi-space-size=0'));

// bin/herald gives the process semi-spaces of 8 to 32 MiB for its main thread; V8 would give them to
// every thread's heap too, whatever the thread's resourceLimits say.
it("a thread keeps its own young generation under the main thread's --max-semi-space-size", async () => {
  const limits = { maxYoungGenerationSizeMb: 3 };
  setFlagsFromString('--max-semi-space-size=16');
  const overridden = await youngPeak(new Worker(churn, { resourceLimits: limits }));
  setFlagsFromString('--max-semi-space-size=16');
  const own = await youngPeak(startThread(churn, { resourceLimits: limits }));
  // new_space counts both semi-spaces and V8's pages around them: about 32 MiB with the flag's
  // 16 MiB semi-spaces, 6 to 10 with the 1 MiB ones of a 3 MiB young generation.
  assert.ok(
    overridden >= 24,
    `a plain Worker's young generation reached ${overridden} MiB: the flag's, not its limit's`,
  );
  assert.ok(own <= 16, `startThread's young generation reached ${own} MiB, the flag's rather than its limit's`);
});
