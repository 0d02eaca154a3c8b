import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { checkName, nameKey } from '../crm/setup.ts';
import { badRequest, conflict } from '../errors.ts';
import { cursorCodec } from '../http/cursor.ts';
import { postProcedure } from '../http/idempotency.ts';
import { MAX_HTML_NESTING, nestsDeeperThan } from './compile.ts';
import { tagsProblem } from '../messaging/tags.ts';

type Db = Kysely<Schema>;

/**
 * Email campaigns (SPEC §1 rule 6: "designed in the service's email creator", outside the
 * spec's endpoints; ARCHITECTURE.md's `POST/GET /email/campaigns`): stored HTML that a batch
 * names by emailCampaignId instead of sending its own emailBody. A batch takes the HTML when
 * it is accepted.
 */

// What HTML may hold besides text: tab, line feed, form feed, carriage return. NUL above all
// must not pass: PostgreSQL's text cannot hold it.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is its purpose
const CONTROL_IN_HTML = /[\u0000-\u0008\u000b\u000e-\u001f\u007f]/;

/**
 * The HTML without what holds brackets that are no tags (docs/email.md): comments (Outlook's
 * [if mso]), style and script. Each end is looked for once from its start, so a body of unclosed
 * comments costs one pass, not one per comment.
 */
function withoutUnfilled(html: string): string {
  const lower = html.toLowerCase();
  const opening = /<!--|<(style|script)\b/g;
  let kept = '';
  let from = 0;
  for (let match = opening.exec(lower); match !== null; match = opening.exec(lower)) {
    if (match.index < from) continue;
    kept += html.slice(from, match.index);
    const close = match[1] === undefined ? '-->' : `</${match[1]}`;
    const end = lower.indexOf(close, match.index + match[0].length);
    if (end === -1) return kept;
    from = end + close.length;
    opening.lastIndex = from;
  }
  return kept + html.slice(from);
}

/** Why HTML cannot be sent, or undefined. */
export function htmlProblem(html: string): { problem: string } | undefined {
  if (html.trim() === '') return { problem: 'must hold the HTML of the email: it is empty' };
  const control = CONTROL_IN_HTML.exec(html);
  if (control) {
    const code = control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0');
    return { problem: `holds the control character U+${code}, which HTML text cannot hold` };
  }
  const tagProblem = tagsProblem(withoutUnfilled(html), 'email');
  if (tagProblem) return { problem: tagProblem };
  if (nestsDeeperThan(html, MAX_HTML_NESTING)) {
    return { problem: `nests elements more than ${MAX_HTML_NESTING} deep (unclosed tags nest too)` };
  }
  return undefined;
}

export interface NewCampaign {
  id: string;
  accountId: string;
  name: string;
  html: string;
  now: number;
}

const view = (row: { id: string; name: string }) => ({ emailCampaignId: row.id, name: row.name });

/** Checks a new campaign (400s), before its transaction. */
export function prepareCampaign(accountId: string, body: { name: string; html: string }, now: number): NewCampaign {
  const name = checkName(body.name, 'name');
  const problem = htmlProblem(body.html);
  if (problem) throw badRequest('The campaign HTML cannot be sent.', [{ field: 'html', message: problem.problem }]);
  return { id: randomUUID(), accountId, name, html: body.html, now };
}

/** POST /email/campaigns: the campaign, created in the request's transaction (http/idempotency.ts). */
export const postCampaign = postProcedure(import.meta.url, 'postCampaign', async ({ db }, campaign: NewCampaign) => {
  try {
    await db
      .insertInto('email_campaigns')
      .values({
        id: campaign.id,
        account_id: campaign.accountId,
        name: campaign.name,
        name_key: nameKey(campaign.name),
        html: campaign.html,
        created_at: campaign.now,
      })
      .execute();
  } catch (error) {
    if (isUniqueViolation(error))
      throw conflict(`An email campaign named ${campaign.name} already exists.`, [
        { field: 'name', message: 'is already taken (names are compared case-insensitively)' },
      ]);
    throw error;
  }
  return { statusCode: 201, body: view(campaign) };
});

const cursor = cursorCodec(['integer', 'uuid']);

/** The account's campaigns, oldest first, a page at a time. */
export async function listCampaigns(db: Db, accountId: string, page: { limit: number; cursor?: string }) {
  let select = db
    .selectFrom('email_campaigns')
    .select(['id', 'name', 'created_at'])
    .where('account_id', '=', accountId);
  if (page.cursor !== undefined) {
    const [createdAt, id] = cursor.decode(page.cursor);
    select = select.where(({ eb, refTuple, tuple }) => eb(refTuple('created_at', 'id'), '>', tuple(createdAt, id)));
  }
  const rows = await select
    .orderBy('created_at')
    .orderBy('id')
    .limit(page.limit + 1)
    .execute();
  const { rows: shown, nextCursor } = cursor.page(rows, page.limit, (last) => [Number(last.created_at), last.id]);
  return { campaigns: shown.map(view), nextCursor };
}

/** The HTML of the account's campaign, or undefined: another account's is as unknown as a missing one. */
export async function campaignHtml(db: Db, accountId: string, campaignId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('email_campaigns')
    .select('html')
    .where('id', '=', campaignId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row?.html;
}
