import type { Migration } from 'kysely';
import * as foundation from './0001_foundation.ts';

/** Every migration, in order. Names are never changed once released: they are the version record. */
export const migrations: Record<string, Migration> = {
  '0001_foundation': foundation,
};
