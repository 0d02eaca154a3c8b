import { Counter, Gauge, type Registry } from 'prom-client';
import type { Database } from '../db/database.ts';

export interface EmailMetrics {
  bounces: Counter<'kind'>;
}

/**
 * The email pipeline's figures in /metrics, whatever its transport: bounces by kind (hard:
 * 5.1.x, the address suppressed; soft: any other refusal for good, or a deferral given up
 * after 72 hours) and — read when scraped — the Deferred recipients waiting for their next
 * try across the deployment, counted from the partial index of the waiting (0021), so a
 * scrape costs what the waiting number, not every recipient.
 */
export function registerEmailMetrics(registry: Registry, database: Database): EmailMetrics {
  const names = ['herald_email_bounces_total', 'herald_email_deferred_recipients'];
  // A worker built again on one registry (tests) reports its own.
  for (const name of names) registry.removeSingleMetric(name);
  const registers = [registry];
  new Gauge({
    name: names[1],
    help: 'email recipients refused for now (Deferred) and waiting for their next try, in every batch',
    registers,
    async collect() {
      const row = await database.db.selectFrom('send_recipients').select((eb) => eb.fn.countAll<number>().as('n')).where('retry_at', 'is not', null).executeTakeFirst();
      this.set(Number(row?.n ?? 0));
    },
  });
  return { bounces: new Counter({ name: names[0], help: 'email Bounces recorded, by kind: hard (5.1.x, suppressed) or soft', labelNames: ['kind'], registers }) };
}
