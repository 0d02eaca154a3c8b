import { sql, type Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { CODE } from './codes.ts';

type Db = Kysely<Schema>;

/** A user agent is kept to this many characters: enough to tell a browser from a link previewer. */
const MAX_USER_AGENT = 512;

/**
 * Follows a link: its URL, with the click recorded (time and user agent; the recipient is the
 * link's) when `record`, or undefined for a code that is not one, which records nothing.
 * `accountId` narrows it to one account's links (a shortener host answers for its own
 * account alone).
 */
export async function followLink(
  db: Db,
  click: { code: string; accountId: string | null; at: number; userAgent: string | undefined; record: boolean },
): Promise<string | undefined> {
  if (!CODE.test(click.code)) return undefined;
  let find = db.selectFrom('links').select('url').where('code', '=', click.code);
  if (click.accountId !== null) find = find.where('account_id', '=', click.accountId);
  const link = await find.executeTakeFirst();
  if (!link || !click.record) return link?.url;
  const userAgent = click.userAgent?.slice(0, MAX_USER_AGENT) ?? null;
  // Written from the link's row, so a link deleted meanwhile (its account's) records nothing.
  await db
    .insertInto('link_clicks')
    .columns(['code', 'at', 'user_agent'])
    .expression(
      db
        .selectFrom('links')
        .select([
          'code',
          sql<number>`cast(${click.at} as bigint)`.as('at'),
          sql<string | null>`cast(${userAgent} as text)`.as('user_agent'),
        ])
        .where('code', '=', click.code),
    )
    .execute();
  return link.url;
}

export interface ClickView {
  at: string;
  userAgent: string | null;
}

/** The clicks shown a recipient: a link opened by a bot in a loop must not swell every read of its send. */
export const MAX_CLICKS_SHOWN = 100;

/** Each recipient's first clicks (MAX_CLICKS_SHOWN at most), oldest first, by recipient id. */
export async function recipientClicks(db: Db, recipientIds: number[]): Promise<Map<number, ClickView[]>> {
  const clicks = new Map<number, ClickView[]>();
  if (recipientIds.length === 0) return clicks;
  const { rows } = await sql<{ recipient_id: number; at: number; user_agent: string | null }>`
    select recipient_id, at, user_agent from (
      select l.recipient_id, c.id, c.at, c.user_agent,
             row_number() over (partition by l.recipient_id order by c.id) as n
        from links l join link_clicks c on c.code = l.code
       where l.recipient_id in (${sql.join(recipientIds)})
    ) ranked
    where n <= ${MAX_CLICKS_SHOWN}
    order by recipient_id, id`.execute(db);
  for (const row of rows) {
    const id = Number(row.recipient_id);
    const list = clicks.get(id) ?? [];
    if (list.length === 0) clicks.set(id, list);
    list.push({ at: new Date(Number(row.at)).toISOString(), userAgent: row.user_agent });
  }
  return clicks;
}

/** Every click on a send's links, its recipients' and the one they share alike. */
export async function sendClicks(db: Db, sendId: string): Promise<number> {
  const row = await db
    .selectFrom('links as l')
    .innerJoin('link_clicks as c', 'c.code', 'l.code')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('l.send_id', '=', sendId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
