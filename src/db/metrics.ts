import { Gauge, type Registry } from 'prom-client';
import type { Database } from './database.ts';

/**
 * Callers waiting for a connection of the process's database (on SQLite its one writing
 * connection, on PostgreSQL the pool): above zero for long, the database, not the process, is
 * what requests and jobs wait on.
 */
export function registerDatabaseMetrics(registry: Registry, database: Database): void {
  new Gauge({
    name: 'herald_db_connection_waiters',
    help: 'Callers of this process waiting for a database connection.',
    registers: [registry],
    collect() {
      this.set(database.waitingForConnection());
    },
  });
}
