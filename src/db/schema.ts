import type { Generated } from 'kysely';

/**
 * Table types for Kysely. Times are epoch milliseconds in a BIGINT on both databases:
 * one representation, no time-zone conversions, and exact ordering.
 * Booleans are INTEGER 0/1 on SQLite and BOOLEAN on PostgreSQL; read them through Boolean().
 */
export interface SettingsTable {
  key: string;
  value: string;
}

export interface AccountsTable {
  id: string;
  user_name: string;
  /** user_name lower-cased: login names are unique case-insensitively. */
  user_name_key: string;
  password_hash: string;
  private_token: string;
  /** Bumped on password change and private-token rotation; tokens carry it and die with it. */
  token_version: Generated<number>;
  time_zone_offset: string;
  locale: string;
  /** JSON object of requests per minute by endpoint group, overriding the defaults; null = defaults. */
  rate_limits: string | null;
  created_at: number;
  updated_at: number;
}

export interface SenderNamesTable {
  account_id: string;
  name: string;
  created_at: number;
}

export interface SenderDomainsTable {
  account_id: string;
  domain: string;
  created_at: number;
}

export interface IdempotencyKeysTable {
  scope: string;
  key: string;
  request_hash: string;
  status_code: number;
  response_body: string;
  created_at: number;
}

export interface Schema {
  settings: SettingsTable;
  accounts: AccountsTable;
  sender_names: SenderNamesTable;
  sender_domains: SenderDomainsTable;
  idempotency_keys: IdempotencyKeysTable;
}
