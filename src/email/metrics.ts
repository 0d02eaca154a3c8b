import { Counter, Gauge, type Registry } from 'prom-client';
import type { Database } from '../db/database.ts';

export interface EmailMetrics {
  bounces: Counter<'kind' | 'timing'>;
}

/**
 * Bounces by kind (hard: 5.1.x, the address suppressed; soft: any other refusal for good, or a
 * deferral given up after 72 hours) and timing (synchronous: the relay's answer; asynchronous:
 * a DSN received later). One counter for the send job and the inbound listener, which may run
 * in one process: whichever asks first makes it.
 */
export function emailBounces(registry: Registry): Counter<'kind' | 'timing'> {
  const name = 'herald_email_bounces_total';
  return (
    (registry.getSingleMetric(name) as Counter<'kind' | 'timing'> | undefined) ??
    new Counter({
      name,
      help:
        'email Bounces recorded, by kind (hard: 5.1.x, suppressed; or soft) and timing (the answer, or a DSN ' +
        'later)',
      labelNames: ['kind', 'timing'],
      registers: [registry],
    })
  );
}

/**
 * The email pipeline's figures in /metrics, whatever its transport: bounces (emailBounces) and
 * — read when scraped — the Deferred recipients waiting for their next try across the
 * deployment, counted from the partial index of the waiting (0021), so a scrape costs what
 * the waiting number, not every recipient.
 */
export function registerEmailMetrics(registry: Registry, database: Database): EmailMetrics {
  const waiting = 'herald_email_deferred_recipients';
  // A worker built again on one registry (tests) counts from its own database.
  registry.removeSingleMetric(waiting);
  const registers = [registry];
  new Gauge({
    name: waiting,
    help: 'email recipients refused for now (Deferred) and waiting for their next try, in every batch',
    registers,
    async collect() {
      // A database that cannot be read fails not the scrape: the figure keeps its last reading
      // (a gauge without labels reset reads 0, which would clear a backlog's alert).
      const row = await database.db
        .selectFrom('send_recipients')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('retry_at', 'is not', null)
        .executeTakeFirst()
        .catch(() => null);
      if (row !== null) this.set(Number(row?.n ?? 0));
    },
  });
  return { bounces: emailBounces(registry) };
}
