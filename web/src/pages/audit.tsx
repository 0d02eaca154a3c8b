import { get, withQuery } from '../api.ts';
import { usePages } from '../load.ts';
import type { AuditEntry } from '../types.ts';
import { Page } from '../components/page.tsx';
import { PagedTable } from '../components/table.tsx';
import { Time } from '../components/zone.tsx';

const auditPage = (cursor: string | undefined) =>
  get<{ entries: AuditEntry[]; nextCursor: string | null }>(withQuery('/audit', { cursor, limit: 100 })).then(
    (page) => ({ items: page.entries, nextCursor: page.nextCursor }),
  );

/** Who an actor is, in words: the API's own name stays in the cell's title. */
function actorName(actor: string): string {
  if (actor.startsWith('apiKey:')) return `API key ${actor.slice('apiKey:'.length)}`;
  return { token: 'Access token', console: 'Console', admin: 'Operator', receiver: 'Webhook receiver' }[actor] ?? actor;
}

/** The audit log (docs/audit.md): who changed what in the account, newest first, read-only. */
export function Audit() {
  const pages = usePages(auditPage, 'audit');
  return (
    <Page title="Audit log">
      <p class="muted">
        Changes to keys, webhooks, suppressions, erasures, deletions and the account, newest first. A person's number or
        address shows as its keyed hash.
      </p>
      <PagedTable
        caption="Audit log, newest first"
        head={['When', 'Who', 'Action', 'Target', 'From']}
        pages={pages}
        empty="Nothing was changed yet."
        row={(entry) => (
          <tr key={`${entry.at}|${entry.action}|${entry.target}`}>
            <td>
              <Time at={entry.at} />
            </td>
            <td title={entry.actor}>{actorName(entry.actor)}</td>
            <td>
              <code>{entry.action}</code>
            </td>
            <td class="mono">{entry.target ?? '—'}</td>
            <td>{entry.ip ?? '—'}</td>
          </tr>
        )}
      />
    </Page>
  );
}
