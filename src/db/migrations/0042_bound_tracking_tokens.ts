import { sql, type Kysely } from 'kysely';

/**
 * From now on a tracking or mailbox token signs its recipient's send (email/tracking-tokens.ts):
 * tokens made before, which sign the row id alone, name recipients of sends accepted before
 * this moment only, so that a row id SQLite gives again does not carry them to another person.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`insert into settings (key, value) values ('tracking_tokens_bound_since', ${String(Date.now())})`.execute(
    db,
  );
}
