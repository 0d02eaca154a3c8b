import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import { recurringHandler } from '../queue/recurring.ts';
import type { JobHandler } from '../queue/worker.ts';
import { EXPIRY_CHUNK, expireVerifications } from './record.ts';

export const VERIFY_EXPIRY_KIND = 'verify.expiry';

/** How often pending verifications past their end are expired: their `expired` webhooks go within this. */
const EVERY_MS = 10_000;

/** Ends pending verifications past their end as `expired`, a chunk a transaction, each posting its webhook. */
export function verifyExpiryHandler(deps: { database: Database; clock: Clock }): JobHandler {
  return recurringHandler(deps.clock, {
    kind: VERIFY_EXPIRY_KIND,
    everyMs: EVERY_MS,
    run: async (signal) => {
      while (!signal.aborted) {
        const expired = await deps.database.call(expireVerifications, { now: deps.clock.now() });
        if (expired < EXPIRY_CHUNK) return;
      }
    },
  });
}
