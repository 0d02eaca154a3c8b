/** A UNIQUE or PRIMARY KEY violation, from either database. */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const e = error as { code?: unknown; errcode?: unknown };
  // PostgreSQL SQLSTATE 23505; SQLite extended codes SQLITE_CONSTRAINT_UNIQUE (2067) and _PRIMARYKEY (1555).
  return e.code === '23505' || e.errcode === 2067 || e.errcode === 1555;
}

/**
 * A FOREIGN KEY violation, from either database: a row the statement names was deleted since it
 * was read (an account deleted while its request ran, by another process or the admin API).
 */
export function isForeignKeyViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const e = error as { code?: unknown; errcode?: unknown };
  // PostgreSQL SQLSTATE 23503; SQLite extended code SQLITE_CONSTRAINT_FOREIGNKEY (787).
  return e.code === '23503' || e.errcode === 787;
}
