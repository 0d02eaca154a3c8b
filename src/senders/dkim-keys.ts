import { createPrivateKey, generateKeyPair, randomBytes, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { sql, type ExpressionBuilder, type Kysely, type Selectable } from 'kysely';
import { isoOrNull, type Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import type { DkimKeysTable, Schema } from '../db/schema.ts';
import { conflict, notFound } from '../errors.ts';
import { open, resealed, seal, type Keyring } from '../sealed.ts';
import { recordAudit, type AuditAction, type AuditBy } from '../audit/entries.ts';

/**
 * The DKIM keys of sender domains (migration 0020): made when the operator authorises a
 * domain for an account, and for the service's DEFAULT_EMAIL_DOMAIN, or for a domain
 * authorised before DKIM existed, the first time anything asks for its key (the record, or a
 * send from it), so no start has to wait on a key nobody may use. Rotation makes a new key
 * under a new selector that signs from then on; the old one stays, retired, until removed,
 * so the operator publishes the new record first and withdraws the old once mail signed
 * with it has been delivered.
 */

type Db = Kysely<Schema>;
type DkimKeyRow = Selectable<DkimKeysTable>;

/**
 * Whose key: an account's, for a sender domain the operator authorised for it, or the service's
 * (accountId null) for DEFAULT_EMAIL_DOMAIN.
 */
export interface DkimKeyHolder {
  accountId: string | null;
  domain: string;
}

/** The DNS TXT record that publishes a key (ARCHITECTURE.md, "Operator admin API"). */
export interface DkimRecord {
  selector: string;
  /** `<selector>._domainkey.<domain>` */
  recordName: string;
  /** `v=DKIM1; k=rsa; p=<base64 DER SubjectPublicKeyInfo>` */
  recordValue: string;
}

/**
 * A domain with its active key's record: the answer of adding a sender domain, listing them, GET
 * /admin/dkim and a rotation.
 */
export interface DkimDomainView {
  domain: string;
  dkim: DkimRecord;
}

/** One key of a domain, active (it signs) or retired by a rotation. */
export interface DkimKeyView extends DkimRecord {
  active: boolean;
  createdAt: string;
  retiredAt: string | null;
}

/** What signs one domain's mail: its active key and the selector its public key is published under. */
export interface DkimSigningKey {
  domain: string;
  selector: string;
  privateKey: KeyObject;
}

/** A key made and sealed, ready to insert: plain data, as a procedure's arguments are. */
export interface NewDkimKey {
  selector: string;
  /** PKCS#8 PEM, sealed. */
  privateKey: string;
  publicKey: string;
  createdAt: number;
}

const generateRsaKeyPair = promisify(generateKeyPair);

/** The private keys are sealed under a key of their own, derived from ENCRYPTION_KEY. */
const sealingKey = (keyring: Keyring) => keyring.derive('herald dkim keys');
/** A sealed key opens only in its own row: copied to another domain or selector, it does not. */
const place = (domain: string, selector: string) => `dkim_keys.private_key:${domain}:${selector}`;

/**
 * `herald-<yyyymmdd>-<6 hex>`: the date says which key is older at a glance in DNS, the random
 * part keeps two keys made the same day apart. A DNS label (letters, digits, hyphens, ≤ 63).
 */
function newSelector(clock: Clock): string {
  const day = new Date(clock.now()).toISOString().slice(0, 10).replaceAll('-', '');
  return `herald-${day}-${randomBytes(3).toString('hex')}`;
}

/**
 * A new RSA-2048 key (RFC 8301 §3.2: 1024 bits at least, 2048 recommended; 4096-bit records
 * exceed what many DNS providers take), generated off the event loop (about 100 ms of CPU)
 * and before any transaction, as argon2 is for passwords.
 */
export async function generateDkimKey(keyring: Keyring, clock: Clock, domain: string): Promise<NewDkimKey> {
  const { privateKey, publicKey } = await generateRsaKeyPair('rsa', { modulusLength: 2048 });
  const selector = newSelector(clock);
  return {
    selector,
    privateKey: seal(
      sealingKey(keyring).current,
      privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
      place(domain, selector),
    ),
    publicKey: (publicKey.export({ type: 'spki', format: 'der' }) as Buffer).toString('base64'),
    createdAt: clock.now(),
  };
}

export function dkimRecord(domain: string, key: { selector: string; public_key: string }): DkimRecord {
  return {
    selector: key.selector,
    recordName: `${key.selector}._domainkey.${domain}`,
    recordValue: `v=DKIM1; k=rsa; p=${key.public_key}`,
  };
}

/** The rows of the holder's keys: the domain's, and the account's or (null) the service's. */
const ofHolder = (holder: DkimKeyHolder) => (eb: ExpressionBuilder<Schema, 'dkim_keys'>) =>
  eb.and([
    eb('domain', '=', holder.domain),
    holder.accountId === null ? eb('account_id', 'is', null) : eb('account_id', '=', holder.accountId),
  ]);

async function findActiveKey(db: Db, holder: DkimKeyHolder): Promise<DkimKeyRow | undefined> {
  return db
    .selectFrom('dkim_keys')
    .selectAll()
    .where(ofHolder(holder))
    .where('retired_at', 'is', null)
    .executeTakeFirst();
}

/** An account's holding exists while the account holds the domain as a sender domain; the service's always does. */
async function checkHolder(db: Db, holder: DkimKeyHolder): Promise<void> {
  if (holder.accountId === null) return;
  const held = await db
    .selectFrom('sender_domains')
    .select('domain')
    .where('account_id', '=', holder.accountId)
    .where('domain', '=', holder.domain)
    .executeTakeFirst();
  if (!held) throw notFound(`The sender domain ${holder.domain} of this account`);
}

function keyValues(holder: DkimKeyHolder, key: NewDkimKey) {
  return {
    domain: holder.domain,
    selector: key.selector,
    account_id: holder.accountId,
    private_key: key.privateKey,
    public_key: key.publicKey,
    created_at: key.createdAt,
    retired_at: null,
  };
}

/**
 * The holder's active key, `key` inserted first if it has none, in the caller's transaction.
 * Two processes making the service domain's first key at once both insert; the partial
 * unique index keeps one, the other's is dropped (ON CONFLICT, no error), and both read it.
 */
export async function insertKeyUnlessActive(db: Db, holder: DkimKeyHolder, key: NewDkimKey): Promise<DkimKeyRow> {
  await db
    .insertInto('dkim_keys')
    .values(keyValues(holder, key))
    .onConflict((oc) => oc.doNothing())
    .execute();
  const active = await findActiveKey(db, holder);
  if (!active) throw new Error(`no active DKIM key of ${holder.domain} after inserting one`);
  return active;
}

export const ensureDkimKey = procedure(
  import.meta.url,
  'ensureDkimKey',
  async ({ db }, args: { holder: DkimKeyHolder; key: NewDkimKey }): Promise<DkimKeyRow> =>
    db.transaction().execute(async (trx) => {
      await checkHolder(trx, args.holder);
      return insertKeyUnlessActive(trx, args.holder, args.key);
    }),
);

/**
 * A change to an account's sender domain's keys, in its audit log (the operator's, `by`), the key
 * named by its record; the service domain's keys are no account's, and have none.
 */
async function auditKeyChange(
  trx: Db,
  holder: DkimKeyHolder,
  change: { action: AuditAction; selector: string; by: AuditBy },
): Promise<void> {
  if (holder.accountId === null) return;
  const target = `${change.selector}._domainkey.${holder.domain}`;
  await recordAudit(trx, { ...change.by, accountId: holder.accountId, action: change.action, target });
}

/** The active key retired as of `now`, the new one active, at once: some key always signs. */
export const replaceDkimKey = procedure(
  import.meta.url,
  'replaceDkimKey',
  async ({ db }, args: { holder: DkimKeyHolder; key: NewDkimKey; now: number; by: AuditBy }): Promise<DkimKeyRow> =>
    db.transaction().execute(async (trx) => {
      await checkHolder(trx, args.holder);
      await trx
        .updateTable('dkim_keys')
        .set({ retired_at: args.now })
        .where(ofHolder(args.holder))
        .where('retired_at', 'is', null)
        .execute();
      const active = await insertKeyUnlessActive(trx, args.holder, args.key);
      await auditKeyChange(trx, args.holder, { action: 'dkimKey.rotated', selector: active.selector, by: args.by });
      return active;
    }),
);

/** The holder's active key, made now if it has none. */
async function activeDkimKey(
  database: Database,
  keyring: Keyring,
  clock: Clock,
  holder: DkimKeyHolder,
): Promise<DkimKeyRow> {
  const active = await findActiveKey(database.db, holder);
  if (active) return active;
  return database.call(ensureDkimKey, { holder, key: await generateDkimKey(keyring, clock, holder.domain) });
}

/** The domain's record to publish, its key made now if it has none. */
export async function dkimDomainView(
  database: Database,
  keyring: Keyring,
  clock: Clock,
  holder: DkimKeyHolder,
): Promise<DkimDomainView> {
  return {
    domain: holder.domain,
    dkim: dkimRecord(holder.domain, await activeDkimKey(database, keyring, clock, holder)),
  };
}

/**
 * The key that signs the holder's mail, opened: looked up once per batch (email/send.ts), then used
 * for each message.
 */
export async function signingKeyFor(
  database: Database,
  keyring: Keyring,
  clock: Clock,
  holder: DkimKeyHolder,
): Promise<DkimSigningKey> {
  const key = await activeDkimKey(database, keyring, clock, holder);
  return {
    domain: key.domain,
    selector: key.selector,
    privateKey: createPrivateKey(open(sealingKey(keyring), key.private_key, place(key.domain, key.selector))),
  };
}

/** A new key under a new selector signs from now on; the one it replaces stays listed, retired. */
export async function rotateDkimKey(
  database: Database,
  keyring: Keyring,
  clock: Clock,
  holder: DkimKeyHolder,
  by: AuditBy,
): Promise<DkimDomainView> {
  const key = await generateDkimKey(keyring, clock, holder.domain);
  const active = await database.call(replaceDkimKey, { holder, key, now: clock.now(), by });
  return { domain: holder.domain, dkim: dkimRecord(holder.domain, active) };
}

/**
 * Every private key sealed anew under the current ENCRYPTION_KEY where one it replaced sealed
 * it (sealed.ts, resealed), so that dropping the old key later stops none from signing. Retired
 * keys too: then nothing in the table needs the old key.
 */
export async function resealDkimKeys(db: Db, keyring: Keyring): Promise<void> {
  const keys = await db.selectFrom('dkim_keys').select(['domain', 'selector', 'private_key']).execute();
  for (const key of keys) {
    const again = resealed(sealingKey(keyring), key.private_key, place(key.domain, key.selector));
    if (!again) continue;
    await db
      .updateTable('dkim_keys')
      .set({ private_key: again })
      .where('domain', '=', key.domain)
      .where('selector', '=', key.selector)
      .where('private_key', '=', key.private_key)
      .execute();
  }
}

/** The holder's keys: the active one, then those rotations retired, the most recently retired first. */
export async function listDkimKeys(db: Db, holder: DkimKeyHolder): Promise<DkimKeyView[]> {
  await checkHolder(db, holder);
  const rows = await db
    .selectFrom('dkim_keys')
    .selectAll()
    .where(ofHolder(holder))
    .orderBy(sql`case when retired_at is null then 0 else 1 end`)
    .orderBy('retired_at', 'desc')
    .orderBy('created_at', 'desc')
    .orderBy('selector')
    .execute();
  return rows.map((row) => ({
    ...dkimRecord(holder.domain, row),
    active: row.retired_at === null,
    createdAt: new Date(row.created_at).toISOString(),
    retiredAt: isoOrNull(row.retired_at),
  }));
}

/** Removes a retired key, once its record is withdrawn from DNS; the active one cannot be (409): rotate first. */
export async function removeDkimKey(db: Db, holder: DkimKeyHolder, selector: string, by: AuditBy): Promise<void> {
  await checkHolder(db, holder);
  const key = await db
    .selectFrom('dkim_keys')
    .selectAll()
    .where(ofHolder(holder))
    .where('selector', '=', selector)
    .executeTakeFirst();
  if (!key) throw notFound(`The DKIM key ${selector} of ${holder.domain}`);
  if (key.retired_at === null)
    throw conflict(
      `The DKIM key ${selector} signs ${holder.domain}'s mail: rotate to a new key first, then remove this one.`,
    );
  await db.transaction().execute(async (trx) => {
    const deleted = await trx
      .deleteFrom('dkim_keys')
      .where(ofHolder(holder))
      .where('selector', '=', selector)
      .where('retired_at', 'is not', null)
      .executeTakeFirst();
    if (Number(deleted.numDeletedRows) > 0)
      await auditKeyChange(trx, holder, { action: 'dkimKey.removed', selector, by });
  });
}
