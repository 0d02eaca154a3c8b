import type { Kysely } from 'kysely';
import type { Schema } from '../../db/schema.ts';
import { silentLog, type Log } from '../../log.ts';
import type { Keyring } from '../../sealed.ts';
import { openConnections, type SmscConnection } from '../routing/connections.ts';
import { readRoutes, RoutingTable, unroutedToDefault, type RouteRow } from '../routing/table.ts';
import { routingVersion } from '../routing/version.ts';
import {
  DEFAULT_SMSC,
  type OutgoingSms,
  type SmsTransport,
  type SubmitOptions,
  type SubmitResult,
} from '../transport.ts';

export interface RoutedTransportOptions {
  /** Where the routes and connections are read. */
  db: Kysely<Schema>;
  keyring: Keyring;
  /** SMS_TRANSPORT's transport, or the sandbox's. */
  defaultTransport: SmsTransport;
  /** Whether SMS_TRANSPORT is set: if not, once a connection was added, a number no route matches is not sent. */
  defaultSet: boolean;
  /** Makes the transport of an added connection; it binds at once. */
  open(connection: SmscConnection): SmsTransport;
  log?: Log;
  /** How often the routing version is read; default 2 s, so a change applies within 5 s. */
  pollMs?: number;
  monotonic?: () => number;
}

/** How long parts wait for a connection that lost its binds before they move to the next of their route. */
export const FAILOVER_PATIENCE_MS = 10_000;
/** How often the routing version is read by default. */
export const POLL_MS = 2_000;

/** A number no route matches, once connections were added and SMS_TRANSPORT is unset. */
const NO_ROUTE: SubmitResult = { accepted: false, permanent: true, error: 'no route', errorCode: null };

interface Opened {
  url: string;
  transport: SmsTransport;
}

interface Routed {
  message: OutgoingSms;
  index: number;
  /** Its route's price per part, the one in force now: recorded with the message. */
  price: { micros: number; currency: string } | undefined;
  /** The connections to try, in turn: the route's with a bind up first, then the rest, each in the route's order. */
  order: string[];
  step: number;
}

/**
 * SMS over several connections (ARCHITECTURE.md, "SMS routes (operator)"): each message goes to
 * a connection of the route its number takes (routing/table.ts), the first with a bind up; a
 * refusal for now moves it to the next, and one that waits for binds on a connection that lost
 * them moves after FAILOVER_PATIENCE_MS; a refusal for good ends it. The routes and connections
 * are read at start and again whenever their version moved (polled every POLL_MS); the
 * connections a route names are opened then, so they bind before traffic comes, and those none
 * names any more are closed.
 */
export function routedTransport(options: RoutedTransportOptions): RoutedTransport {
  return new RoutedTransport(options);
}

export class RoutedTransport implements SmsTransport {
  private readonly options: RoutedTransportOptions;
  private readonly log: Log;
  private readonly monotonic: () => number;
  private table = new RoutingTable([]);
  private opened = new Map<string, Opened>();
  private anyAdded = false;
  /** Whether a message may go to `default`: an unrouted one, or one whose route names it. */
  private defaultReached = true;
  private version: number | undefined;
  private checkedAt = Number.NEGATIVE_INFINITY;
  private loading: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(options: RoutedTransportOptions) {
    this.options = options;
    this.log = options.log ?? silentLog;
    this.monotonic = options.monotonic ?? (() => performance.now());
    // Read at once and then while idle too, so the connections bind before the first message
    // and a change applies (and shows in GET /admin/smsc) with no traffic.
    const refresh = () => {
      this.fresh().catch((error: unknown) => this.log.warn({ err: error }, 'the SMS routes could not be read'));
    };
    refresh();
    this.timer = setInterval(refresh, options.pollMs ?? POLL_MS);
    this.timer.unref();
  }

  /** Every connection this process holds open, `default` first: the binds it reports (routing/binds.ts). */
  connections(): ReadonlyMap<string, SmsTransport> {
    return new Map([
      [DEFAULT_SMSC, this.options.defaultTransport],
      ...[...this.opened].map(([name, { transport }]) => [name, transport] as const),
    ]);
  }

  async submit(messages: OutgoingSms[], signal: AbortSignal, options: SubmitOptions = {}): Promise<SubmitResult[]> {
    await this.fresh();
    const results: SubmitResult[] = new Array(messages.length);
    let pending: Routed[] = [];
    // Each route's order and price once a page: the page's messages mostly share a few routes.
    const routings = new Map<RouteRow | undefined, Pick<Routed, 'order' | 'price'>>();
    messages.forEach((message, index) => {
      const route = this.table.routeFor(message.accountId, message.recipient);
      let routing = routings.get(route);
      if (!routing) {
        const price =
          route?.priceMicros != null && route.currency !== null
            ? { micros: route.priceMicros, currency: route.currency }
            : undefined;
        routing = { order: this.orderFor(route), price };
        routings.set(route, routing);
      }
      if (routing.order.length === 0) results[index] = NO_ROUTE;
      else pending.push({ message, index, ...routing, step: 0 });
    });
    while (pending.length > 0) {
      const groups = new Map<string, Routed[]>();
      for (const routed of pending) {
        const key = `${routed.order[routed.step]}\n${routed.step === routed.order.length - 1}`;
        const group = groups.get(key);
        if (group) group.push(routed);
        else groups.set(key, [routed]);
      }
      const next: Routed[] = [];
      await Promise.all(
        [...groups.values()].map(async (group) => {
          const { order, step } = group[0];
          const name = order[step];
          const last = step === order.length - 1;
          const answered = await this.submitTo(name, group, signal, {
            ...options,
            ...(last ? {} : { noBindPatienceMs: FAILOVER_PATIENCE_MS }),
          });
          answered.forEach((result, i) => {
            const routed = group[i];
            if (result.accepted) {
              const smsc = result.smsc ?? result.operatorMessageIds.map(() => name);
              results[routed.index] = { ...result, smsc, ...(routed.price && { pricePerPart: routed.price }) };
            } else if (result.permanent || last || signal.aborted) {
              // Parts it took before the refusal are billed at its route's price.
              const priced = result.taken?.length && routed.price ? { pricePerPart: routed.price } : {};
              results[routed.index] = { ...result, ...priced };
            } else {
              next.push({ ...routed, step: step + 1 });
            }
          });
        }),
      );
      pending = next;
    }
    return results;
  }

  private unroutedToDefault(): boolean {
    return unroutedToDefault({ anyAdded: this.anyAdded, defaultSet: this.options.defaultSet });
  }

  /** True when every connection a message may go to skips what it answered before (SmsTransport). */
  skipsAnswered(): boolean {
    const reached = [...this.opened.values()].map((open) => open.transport);
    if (this.defaultReached) reached.push(this.options.defaultTransport);
    return reached.every((transport) => transport.skipsAnswered?.() === true);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.loading?.catch(() => {});
    const transports = [this.options.defaultTransport, ...[...this.opened.values()].map((o) => o.transport)];
    this.opened = new Map();
    await Promise.all(transports.map((transport) => transport.close()));
  }

  private async submitTo(
    name: string,
    group: Routed[],
    signal: AbortSignal,
    options: SubmitOptions,
  ): Promise<SubmitResult[]> {
    const transport = this.transportOf(name);
    if (!transport) {
      const error = `the connection ${name} is not open`;
      const closed: SubmitResult = { accepted: false, permanent: false, error, errorCode: null };
      return group.map(() => closed);
    }
    return transport.submit(
      group.map((routed) => routed.message),
      signal,
      options,
    );
  }

  private transportOf(name: string): SmsTransport | undefined {
    return name === DEFAULT_SMSC ? this.options.defaultTransport : this.opened.get(name)?.transport;
  }

  /** The connections a message tries: its route's, those with a bind up first; `default` for none; or none at all. */
  private orderFor(route: RouteRow | undefined): string[] {
    if (!route) return this.unroutedToDefault() ? [DEFAULT_SMSC] : [];
    // A transport that does not bind (the sandbox) is up while it is open.
    const up = (name: string) => {
      const transport = this.transportOf(name);
      return transport !== undefined && (transport.bindsUp?.() ?? 1) > 0;
    };
    return [...route.smsc.filter(up), ...route.smsc.filter((name) => !up(name))];
  }

  /**
   * The routes and connections as of at most POLL_MS ago. Until the first read of them is
   * applied there are none to go by, so a message waits for it: taken by the empty table, it
   * would go to `default` (the sandbox, unless SMS_TRANSPORT is set), reported Delivered and
   * sent nowhere. Once one is applied, a message goes by it while a later read is under way.
   */
  private async fresh(): Promise<void> {
    const read = this.version !== undefined;
    if (read && this.monotonic() - this.checkedAt < (this.options.pollMs ?? POLL_MS)) return;
    this.loading ??= this.reload().finally(() => {
      this.loading = undefined;
    });
    await this.loading;
  }

  private async reload(): Promise<void> {
    const { db, keyring } = this.options;
    // Read as of when the read began: stamped once it returned, a read slow to come back (a loaded
    // machine) made the routes seem newer than they were, and a change waited past POLL_MS.
    const asOf = this.monotonic();
    const version = await routingVersion(db);
    this.checkedAt = asOf;
    if (version === this.version) return;
    const unopenable = (name: string, error: unknown) =>
      this.log.error({ err: error, smsc: name }, 'the connection cannot be opened here: its routes go to the next');
    const [rows, added] = await Promise.all([readRoutes(db), openConnections(db, keyring, unopenable)]);
    const named = new Set(rows.flatMap((row) => row.smsc));
    const opened = new Map<string, Opened>();
    // Every connection stays bound while it exists, named by a route or not: receipts for the
    // parts it took come over its own binds only.
    for (const connection of added) {
      const open = this.opened.get(connection.name);
      opened.set(
        connection.name,
        open?.url === connection.url ? open : { url: connection.url, transport: this.options.open(connection) },
      );
    }
    for (const [name, open] of this.opened) {
      if (opened.get(name) === open) continue;
      open.transport.close().catch((error: unknown) => this.log.warn({ err: error, smsc: name }, 'closing failed'));
    }
    this.opened = opened;
    this.table = new RoutingTable(rows);
    this.anyAdded = added.length > 0;
    this.defaultReached = this.unroutedToDefault() || named.has(DEFAULT_SMSC);
    this.version = version;
  }
}
