import { sql, type Kysely } from 'kysely';

/**
 * DKIM keys (src/senders/dkim-keys.ts): each sender domain's signing keys, an account's for the
 * domains the operator authorised for it, the service's (account_id null) for
 * DEFAULT_EMAIL_DOMAIN. A domain has one active key (retired_at null), which signs, and the
 * keys a rotation retired, listed until the operator removes them, so the new record can be
 * published before the old one is withdrawn.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // The selector names the key in DNS (<selector>._domainkey.<domain>), whoever holds the
  // domain: unique per domain. private_key is PKCS#8 PEM sealed under ENCRYPTION_KEY
  // (sealed.ts); public_key the base64 DER SPKI published as the record's p=.
  await db.schema
    .createTable('dkim_keys')
    .addColumn('domain', 'text', (c) => c.notNull())
    .addColumn('selector', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.references('accounts.id').onDelete('cascade'))
    .addColumn('private_key', 'text', (c) => c.notNull())
    .addColumn('public_key', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('retired_at', 'bigint')
    .addPrimaryKeyConstraint('dkim_keys_pkey', ['domain', 'selector'])
    .execute();
  // One active key per holder of a domain. Two indexes, since a unique index counts each null
  // account_id as distinct: the service's domain would otherwise take any number.
  await sql`create unique index dkim_keys_active on dkim_keys (account_id, domain)
              where retired_at is null and account_id is not null`.execute(db);
  await sql`create unique index dkim_keys_service_active on dkim_keys (domain)
              where retired_at is null and account_id is null`.execute(db);
  await db.schema.createIndex('dkim_keys_account').on('dkim_keys').columns(['account_id', 'domain']).execute();
}
