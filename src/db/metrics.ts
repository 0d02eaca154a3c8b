import { Counter, Gauge, type Registry } from 'prom-client';
import type { Database, GroupCount } from './database.ts';

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
  // Counted by the database (Database.gathered) as groups are written; read at each scrape.
  const gathered = (name: string, help: string, count: (group: GroupCount) => number) =>
    new Counter({
      name,
      help,
      labelNames: ['procedure'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [procedure, group] of database.gathered()) this.inc({ procedure }, count(group));
      },
    });
  gathered('herald_db_write_groups_total', 'Groups of requests written together, by procedure.', (g) => g.groups);
  gathered('herald_db_grouped_writes_total', 'Requests written in those groups, by procedure.', (g) => g.callers);
}
