import { sql, type Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import { type Config, parseSmsTransport } from '../../config.ts';
import type { Schema } from '../../db/schema.ts';
import { badRequest, conflict, notFound } from '../../errors.ts';
import { open, resealed, seal, type Keyring } from '../../sealed.ts';
import { shownUrl } from '../../url-password.ts';
import { notFinal, unrecordedAnswer } from '../queries.ts';
import { DEFAULT_SMSC } from '../transport.ts';
import { bumpRoutingVersion } from './version.ts';

export const SMSC_NAME = /^[a-z0-9-]{1,32}$/;
export const SMSC_NAME_RULE = 'must be 1 to 32 lower-case letters, digits and hyphens';

/** How long a worker's binds row counts after it was written: three of its beats. */
export const BINDS_FRESH_MS = 15_000;

export interface SmscView {
  name: string;
  url: string;
  state: 'up' | 'down' | 'sandbox';
  binds: number;
}

/** A connection as the worker opens it: its URL opened, and its transport's settings. */
export interface SmscConnection {
  name: string;
  url: string;
  transport: Config['smsTransport'];
}

/** The URLs are sealed under a key of their own, derived from ENCRYPTION_KEY; each opens only in its own row. */
const sealingKey = (keyring: Keyring) => keyring.derive('herald smsc urls');
const place = (name: string) => `smsc_connections:${name}`;

/** Adds a connection (POST /admin/smsc): 400 for a URL that SMS_TRANSPORT would refuse, 409 for a name taken. */
export async function addConnection(
  db: Kysely<Schema>,
  keyring: Keyring,
  clock: Clock,
  input: { name: string; url: string },
): Promise<{ name: string; url: string }> {
  // Checked here too, not only by the admin route's schema: `herald smsc add` comes this way.
  if (!SMSC_NAME.test(input.name)) {
    throw badRequest('The connection name is not valid.', [{ field: 'name', message: SMSC_NAME_RULE }]);
  }
  try {
    parseSmsTransport(input.url);
  } catch (error) {
    throw badRequest('The connection URL is not one SMS_TRANSPORT would take.', [
      { field: 'url', message: (error as Error).message },
    ]);
  }
  if (input.name === DEFAULT_SMSC) throw conflict('The connection "default" is SMS_TRANSPORT: it is set there.');
  const url = shownUrl(input.url);
  const sealedUrl = seal(sealingKey(keyring).current, input.url, place(input.name));
  const added = await db.transaction().execute(async (trx) => {
    await bumpRoutingVersion(trx);
    const row = await trx
      .insertInto('smsc_connections')
      .values({ name: input.name, url, sealed_url: sealedUrl, created_at: clock.now() })
      .onConflict((oc) => oc.column('name').doNothing())
      .returning('name')
      .executeTakeFirst();
    return row !== undefined;
  });
  if (!added) throw conflict(`A connection named "${input.name}" exists already.`);
  return { name: input.name, url };
}

/** Every connection, `default` first, each with the binds the live worker processes hold on it. */
export async function listConnections(
  db: Kysely<Schema>,
  clock: Clock,
  defaultTransport: { raw: string; kind: Config['smsTransport']['kind'] },
): Promise<SmscView[]> {
  const [rows, binds] = await Promise.all([
    db.selectFrom('smsc_connections').select(['name', 'url']).orderBy('name').execute(),
    db
      .selectFrom('smsc_binds')
      .select(['smsc', (eb) => eb.fn.sum<number | string>('binds').as('binds')])
      .where('seen_at', '>', clock.now() - BINDS_FRESH_MS)
      .groupBy('smsc')
      .execute(),
  ]);
  const up = new Map(binds.map((row) => [row.smsc, Number(row.binds)]));
  const view = (name: string, url: string, sandbox: boolean): SmscView => {
    const held = up.get(name) ?? 0;
    return { name, url, state: sandbox ? 'sandbox' : held > 0 ? 'up' : 'down', binds: held };
  };
  return [
    view(DEFAULT_SMSC, shownUrl(defaultTransport.raw), defaultTransport.kind === 'sandbox'),
    ...rows.map((row) => view(row.name, row.url, isSandboxUrl(row.url))),
  ];
}

/**
 * Whether every message leaves through a sandbox: SMS_TRANSPORT and every added connection. Only
 * then may a message from a handset be simulated (POST /sandbox/sms/inbound), since a simulated
 * START would otherwise lift a real person's STOP.
 */
export async function sendsOnlyToSandbox(
  db: Kysely<Schema>,
  defaultKind: Config['smsTransport']['kind'],
): Promise<boolean> {
  if (defaultKind !== 'sandbox') return false;
  const rows = await db.selectFrom('smsc_connections').select('url').execute();
  return rows.every((row) => isSandboxUrl(row.url));
}

/** Whether a connection's URL (as shown) is a sandbox's. */
const isSandboxUrl = (url: string) => url.startsWith('sandbox:');

/**
 * Removes a connection (DELETE /admin/smsc/{name}): 409 for `default`, while a route names it,
 * or while parts it took still await their receipts (they are matched within the connection).
 */
export async function removeConnection(db: Kysely<Schema>, name: string): Promise<void> {
  if (name === DEFAULT_SMSC) throw conflict('The connection "default" is SMS_TRANSPORT: it cannot be removed.');
  await db.transaction().execute(async (trx) => {
    await bumpRoutingVersion(trx);
    const exists = await trx.selectFrom('smsc_connections').select('name').where('name', '=', name).executeTakeFirst();
    if (!exists) throw notFound(`The connection "${name}"`);
    const routes = await trx.selectFrom('sms_routes').select(['position', 'smsc']).execute();
    const naming = routes.filter((route) => (JSON.parse(route.smsc) as string[]).includes(name));
    if (naming.length > 0) {
      throw conflict(`The connection "${name}" is named by ${naming.length} route(s): change the routes first.`);
    }
    const awaiting = await trx
      .selectFrom('sms_parts')
      .select('recipient_id')
      .where('smsc', '=', name)
      .where(notFinal(sql.ref('status')))
      .limit(1)
      .executeTakeFirst();
    // A page in flight: its answers are kept before its outcome is recorded (smpp_submits), and
    // after it until the retention sweep, when they no longer count.
    const answered = await trx
      .selectFrom('smpp_submits')
      .select('send_id')
      .where('smsc', '=', name)
      .where(unrecordedAnswer)
      .limit(1)
      .executeTakeFirst();
    if (awaiting || answered) {
      throw conflict(`Parts the connection "${name}" took still await their receipts: remove it once they end.`);
    }
    await trx.deleteFrom('smsc_connections').where('name', '=', name).execute();
  });
}

/**
 * The added connections, their URLs opened (a worker process's routing). One this process cannot
 * open (its URL sealed under a key it lacks, its `ca=` file missing here) is left out and told to
 * `unopenable`: its routes go on to their next connection, and the others are as ever.
 */
export async function openConnections(
  db: Kysely<Schema>,
  keyring: Keyring,
  unopenable: (name: string, error: unknown) => void,
): Promise<SmscConnection[]> {
  const rows = await db.selectFrom('smsc_connections').select(['name', 'sealed_url']).orderBy('name').execute();
  return rows.flatMap((row) => {
    try {
      const url = open(sealingKey(keyring), row.sealed_url, place(row.name));
      return [{ name: row.name, url, transport: parseSmsTransport(url) }];
    } catch (error) {
      unopenable(row.name, error);
      return [];
    }
  });
}

/**
 * Every connection's URL sealed anew under the current ENCRYPTION_KEY where one it replaced sealed
 * it (sealed.ts, resealed), so that dropping the old key later stops no connection from binding.
 */
export async function resealSmscUrls(db: Kysely<Schema>, keyring: Keyring): Promise<void> {
  const rows = await db.selectFrom('smsc_connections').select(['name', 'sealed_url']).execute();
  for (const row of rows) {
    const again = resealed(sealingKey(keyring), row.sealed_url, place(row.name));
    if (!again) continue;
    await db
      .updateTable('smsc_connections')
      .set({ sealed_url: again })
      .where('name', '=', row.name)
      .where('sealed_url', '=', row.sealed_url)
      .execute();
  }
}
