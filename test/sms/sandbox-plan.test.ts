import assert from 'node:assert/strict';
import { it } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import { sandboxPageQuery } from '../../src/sms/read.ts';
import { createTestDatabase, forEachDatabase } from '../support/databases.ts';

// An account's page of the sandbox must be a seek on its own parts, never a walk through every
// account's parts in id order (what it was with only the recipient's index leading with the account).
forEachDatabase((dialect) => {
  for (const recipient of [undefined, '919800000001']) {
    const name = `reads an account's sandbox page on an index that leads with it (recipient ${recipient ?? 'any'})`;
    it(name, async () => {
      const t = await createTestDatabase(dialect);
      try {
        const statement = sandboxPageQuery(t.db, 'an-account', { recipient, limit: 100 }).compile();
        const plan = await t.db.transaction().execute(async (trx) => {
          // An empty table's cheapest plan is a scan whatever the indexes: ask for the plan the
          // planner keeps for a large one.
          if (dialect === 'postgres') await sql`set local enable_seqscan = off`.execute(trx);
          const explain = dialect === 'postgres' ? 'explain' : 'explain query plan';
          const { rows } = await trx.executeQuery<Record<string, string>>(
            CompiledQuery.raw(`${explain} ${statement.sql}`, [...statement.parameters]),
          );
          return rows.map((row) => row['QUERY PLAN'] ?? row.detail).join('\n');
        });
        // Both indexes lead with the account; only the new one serves the newest-first order alone.
        const index = recipient === undefined ? /\bsandbox_sms_account\b/ : /\bsandbox_sms_(account|recipient)\b/;
        assert.match(plan, index, plan);
        assert.doesNotMatch(plan, /TEMP B-TREE|Sort|Seq Scan|SCAN sandbox_sms\b(?! USING)/, plan);
      } finally {
        await t.close();
      }
    });
  }
});
