import { Gauge, type Registry } from 'prom-client';
import { sql, type Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Schema } from '../db/schema.ts';

interface KindState {
  kind: string;
  state: string;
  jobs: number | string;
  oldest_due: number | string | null;
}

/**
 * Queue depth by kind and state, and the age of the oldest job that is due but not yet
 * claimed: the two figures that tell an operator whether workers keep up. Read from the
 * database at scrape time, so every API process reports the one shared queue.
 */
export function registerQueueMetrics(registry: Registry, db: Kysely<Schema>, clock: Clock): void {
  // prom-client collects the gauges of one scrape concurrently: they share one query. A
  // database that cannot be read leaves them out, not the scrape: the process's own figures are
  // what an operator needs most then.
  let reading: Promise<{ now: number; rows: KindState[] }> | undefined;
  const read = () =>
    (reading ??= (async () => {
      const now = clock.now();
      const { rows } = await sql<KindState>`
        select kind, state, count(*) as jobs,
               min(case when state = 'ready' and run_at <= ${now} then run_at end) as oldest_due
          from jobs group by kind, state`.execute(db);
      return { now, rows };
    })()
      .catch(() => ({ now: clock.now(), rows: [] }))
      .finally(() => {
        reading = undefined;
      }));

  new Gauge({
    name: 'herald_queue_jobs',
    help: 'Jobs in the queue by kind and state (ready, running, dead).',
    labelNames: ['kind', 'state'],
    registers: [registry],
    async collect() {
      const { rows } = await read();
      this.reset();
      for (const row of rows) this.set({ kind: row.kind, state: row.state }, Number(row.jobs));
    },
  });
  new Gauge({
    name: 'herald_queue_oldest_ready_age_seconds',
    help: 'How long the oldest due, unclaimed job of each kind has waited.',
    labelNames: ['kind'],
    registers: [registry],
    async collect() {
      const { now, rows } = await read();
      this.reset();
      for (const row of rows) {
        if (row.oldest_due !== null) this.set({ kind: row.kind }, (now - Number(row.oldest_due)) / 1000);
      }
    },
  });
}
