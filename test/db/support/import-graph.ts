import { once } from 'node:events';
import { Worker } from 'node:worker_threads';

/**
 * The URL of every module that loads with these modules, imported in a fresh thread as the
 * SQLite thread imports its own (import-graph-thread.ts).
 */
export async function modulesLoadedWith(modules: readonly string[]): Promise<string[]> {
  const worker = new Worker(new URL('./import-graph-thread.ts', import.meta.url), { workerData: { modules } });
  const [loaded] = (await once(worker, 'message')) as [string[]];
  await worker.terminate();
  return loaded;
}
