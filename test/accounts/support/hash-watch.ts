/**
 * Runs a check at the start of every password hash of this process, before the hash: node:crypto's
 * argon2 is wrapped here, and the live binding of `import { argon2 } from 'node:crypto'`
 * updated, so this module must load before any module of the application captures it
 * (import it first). Test files run in processes of their own: the wrap stays in this one.
 */
import crypto from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';
import { mock } from 'node:test';

let check: (() => Promise<void>) | undefined;

const hash = crypto.argon2;
mock.method(crypto, 'argon2', ((algorithm, parameters, callback) => {
  const checking = check?.() ?? Promise.resolve();
  // The hash runs whatever the check found: a failed check is the test's to report.
  void checking.catch(() => {}).then(() => hash(algorithm, parameters, callback));
}) as typeof crypto.argon2);
syncBuiltinESMExports();

/** Calls `each` as every password hash starts, until the returned function is called. */
export function atEveryHash(each: () => Promise<void>): () => void {
  check = each;
  return () => (check = undefined);
}
