/** A UNIQUE or PRIMARY KEY violation, from either database. */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const e = error as { code?: unknown; errcode?: unknown };
  // PostgreSQL SQLSTATE 23505; SQLite extended codes SQLITE_CONSTRAINT_UNIQUE (2067) and _PRIMARYKEY (1555).
  return e.code === '23505' || e.errcode === 2067 || e.errcode === 1555;
}
