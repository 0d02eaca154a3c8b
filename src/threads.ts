import { setFlagsFromString } from 'node:v8';
import { Worker, type ResourceLimits, type WorkerOptions } from 'node:worker_threads';

/**
 * A worker thread whose V8 heap is sized by its own `resourceLimits`. bin/herald gives the
 * process `--max-semi-space-size`, and V8 lets that flag override every isolate's young
 * generation limit (Heap::ConfigureHeap reads it as each isolate is made): the main thread's
 * 8 MiB semi-spaces went to each thread too, whatever its limits said. The main heap was
 * configured when the process started, so the flag is unset here, before each thread's heap
 * is made, and the thread's own limit holds.
 */
export function startThread(url: URL, options: WorkerOptions & { resourceLimits: ResourceLimits }): Worker {
  setFlagsFromString('--max-semi-space-size=0');
  return new Worker(url, options);
}
