import { PostgresAdapter, sql, type Kysely } from 'kysely';

/**
 * Webhook secrets rest sealed under ENCRYPTION_KEY (webhooks/secrets.ts), in columns of their
 * own, and the clear columns may be emptied; the token key moves the same way in `settings`,
 * from `jwt_secret` to `sealed_jwt_secret`, which needs no change of schema. The sealing
 * itself is done at the start of `serve` (stored-secrets.ts), which holds the key: a
 * migration does not (`herald migrate` runs without ENCRYPTION_KEY on PostgreSQL). New names,
 * not new values in the old ones, so that a process still on the code before, during a
 * rolling upgrade, never takes a sealed value for a key.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) await postgres(db);
  else await sqlite(db);
}

async function postgres(db: Kysely<unknown>): Promise<void> {
  await sql`alter table webhook_secrets
              add column sealed_secret text,
              add column sealed_previous_secret text,
              alter column secret drop not null,
              add constraint webhook_secrets_one_secret
                check (secret is not null or sealed_secret is not null)`.execute(db);
}

// SQLite cannot drop a NOT NULL in place: the table is rebuilt. Nothing refers to it.
async function sqlite(db: Kysely<unknown>): Promise<void> {
  await sql`create table webhook_secrets_new (
              account_id text primary key references accounts (id) on delete cascade,
              secret text,
              previous_secret text,
              previous_expires_at bigint,
              created_at bigint not null,
              rotated_at bigint,
              sealed_secret text,
              sealed_previous_secret text,
              constraint webhook_secrets_one_secret
                check (secret is not null or sealed_secret is not null))`.execute(db);
  await sql`insert into webhook_secrets_new
                   (account_id, secret, previous_secret, previous_expires_at, created_at, rotated_at)
            select account_id, secret, previous_secret, previous_expires_at, created_at, rotated_at
              from webhook_secrets`.execute(db);
  await sql`drop table webhook_secrets`.execute(db);
  await sql`alter table webhook_secrets_new rename to webhook_secrets`.execute(db);
}
