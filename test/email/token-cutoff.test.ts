import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { loadConfig } from '../../src/config.ts';
import { BOUND_TOKENS_SINCE } from '../../src/email/token-recipients.ts';
import { closeContext, createContext } from '../../src/server/server.ts';
import { createTestDatabase, forEachDatabase } from '../support/databases.ts';

// When a database was first served by a version whose tokens sign their send: on SQLite, which
// gives a row id again, the bound of the earlier tokens (test/email/tracking.test.ts uses it).
forEachDatabase((dialect) => {
  it(
    dialect === 'sqlite'
      ? 'keeps the first start’s time, which later starts leave as it is'
      : 'keeps no such time: an id names one row for good',
    async () => {
      const database = await createTestDatabase(dialect, { empty: true });
      const config = loadConfig({ DATABASE_URL: database.url, ENCRYPTION_KEY: randomBytes(32).toString('hex') });
      const since = async (at: number) => {
        const ctx = await createContext(config, new ManualClock(at));
        try {
          const rows = await ctx.db
            .selectFrom('settings')
            .select('value')
            .where('key', '=', BOUND_TOKENS_SINCE)
            .execute();
          return rows.map((r) => r.value);
        } finally {
          await closeContext(ctx);
        }
      };
      try {
        const first = dialect === 'sqlite' ? ['1700000000000'] : [];
        assert.deepEqual(await since(1_700_000_000_000), first);
        assert.deepEqual(await since(1_800_000_000_000), first);
      } finally {
        await database.close();
      }
    },
  );
});
