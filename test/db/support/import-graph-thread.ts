/**
 * Imports the modules it is given in a fresh thread, as the SQLite thread does, and posts
 * back the URL of every module that loaded along with them.
 */
import { registerHooks } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';

const loaded: string[] = [];
registerHooks({
  resolve(specifier, context, next) {
    const resolved = next(specifier, context);
    loaded.push(resolved.url);
    return resolved;
  },
});
for (const module of workerData.modules as string[]) await import(module);
parentPort!.postMessage(loaded);
