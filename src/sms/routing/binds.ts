import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { Schema } from '../../db/schema.ts';
import type { Log } from '../../log.ts';
import type { SmsTransport } from '../transport.ts';

/** How often a worker process writes its binds: BINDS_FRESH_MS (connections.ts) is three of these. */
const BEAT_MS = 5_000;

/**
 * A worker process's binds up per connection, written to smsc_binds every few seconds, so that
 * GET /admin/smsc shows them from any process; its rows go when it closes, and rows of a process
 * that died stop counting once stale.
 */
export class BindsBeat {
  private readonly process = randomUUID();
  private readonly db: Kysely<Schema>;
  private readonly clock: Clock;
  private readonly connections: () => ReadonlyMap<string, SmsTransport>;
  private readonly timer: NodeJS.Timeout;
  private beating: Promise<void> = Promise.resolve();

  constructor(db: Kysely<Schema>, clock: Clock, connections: () => ReadonlyMap<string, SmsTransport>, log?: Log) {
    this.db = db;
    this.clock = clock;
    this.connections = connections;
    this.timer = setInterval(() => {
      this.beating = this.beat().catch((error: unknown) => log?.warn({ err: error }, 'smsc binds not written'));
    }, BEAT_MS);
    this.timer.unref();
  }

  private async beat(): Promise<void> {
    const now = this.clock.now();
    const rows = [...this.connections()].flatMap(([smsc, transport]) => {
      const binds = transport.bindsUp?.();
      return binds === undefined ? [] : [{ process: this.process, smsc, binds, seen_at: now }];
    });
    if (rows.length === 0) return;
    await this.db
      .insertInto('smsc_binds')
      .values(rows)
      .onConflict((oc) =>
        oc.columns(['process', 'smsc']).doUpdateSet((eb) => ({
          binds: eb.ref('excluded.binds'),
          seen_at: eb.ref('excluded.seen_at'),
        })),
      )
      .execute();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.beating;
    await this.db.deleteFrom('smsc_binds').where('process', '=', this.process).execute();
  }
}
